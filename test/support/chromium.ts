/** Debian's headless Chromium, run the way this machine allows (no sandbox as root, no background network). */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const flags = () => [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  `--user-data-dir=${mkdtempSync(join(tmpdir(), 'chromium-'))}`,
];

/** The DOM of a page after Chromium loaded and laid it out. */
export async function renderedDom(url: string): Promise<string> {
  const { stdout } = await run(CHROMIUM, [...flags(), '--dump-dom', url], {
    maxBuffer: 32 << 20,
    timeout: 60_000,
  });
  return stdout;
}

/** Prints a page to PDF, as a person pressing Print would get it. */
export async function printToPdf(url: string, pdf: string): Promise<void> {
  await run(CHROMIUM, [...flags(), '--no-pdf-header-footer', `--print-to-pdf=${pdf}`, url], {
    timeout: 60_000,
  });
}
