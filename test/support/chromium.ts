/**
 * A real headless Chromium for the tests that look at what a person sees, with nothing installed by hand: the
 * Chromium that the npm package @sparticuz/chromium ships, with the NSS libraries it carries when the system has
 * none, so every machine runs what a fresh clone runs. `CHROMIUM_PATH` names another Chromium to use instead (a
 * system one); `TEST_BROWSER=packaged-libs` forces the packaged libraries too. Driven over the DevTools protocol by
 * puppeteer-core.
 */
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, launch } from 'puppeteer-core';

/** A Chromium of the machine's, only when asked for by path. */
const CHROMIUM_PATH = process.env.CHROMIUM_PATH;

const FLAGS = [
  '--no-sandbox', // tests run as root on CI machines
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Whether the dynamic linker already knows the NSS libraries Chromium links against. */
function systemHasNss(): boolean {
  try {
    return execFileSync('ldconfig', ['-p'], { encoding: 'utf8' }).includes('libnss3.so');
  } catch {
    return false;
  }
}

async function packagedChromium(): Promise<{ path: string; env: NodeJS.ProcessEnv }> {
  const { default: Chromium, inflate } = await import('@sparticuz/chromium');
  const path = await Chromium.executablePath();
  const env = { ...process.env };
  if (process.env.TEST_BROWSER === 'packaged-libs' || !systemHasNss()) {
    // The package's Amazon Linux 2023 libraries (NSS and what it needs), unpacked beside the binary.
    const bin = join(import.meta.dirname, '../../node_modules/@sparticuz/chromium/bin/al2023.tar.br');
    await inflate(bin);
    const lib = join(tmpdir(), 'al2023', 'lib');
    env.LD_LIBRARY_PATH = [lib, env.LD_LIBRARY_PATH].filter(Boolean).join(':');
  }
  return { path, env };
}

/** Starts the browser; the caller closes it. */
async function browser(): Promise<Browser> {
  if (CHROMIUM_PATH) return launch({ executablePath: CHROMIUM_PATH, headless: true, args: FLAGS });
  const packaged = await packagedChromium();
  return launch({ executablePath: packaged.path, headless: 'shell', args: FLAGS, env: packaged.env });
}

async function withPage<T>(url: string, use: (page: import('puppeteer-core').Page) => Promise<T>) {
  const instance = await browser();
  try {
    const page = await instance.newPage();
    await page.goto(url, { waitUntil: 'load', timeout: 60_000 });
    return await use(page);
  } finally {
    await instance.close();
  }
}

/** The DOM of a page after Chromium loaded and laid it out. */
export function renderedDom(url: string): Promise<string> {
  return withPage(url, (page) => page.content());
}

/** Prints a page to PDF, as a person pressing Print would get it. */
export async function printToPdf(url: string, pdf: string): Promise<void> {
  await withPage(url, (page) => page.pdf({ path: pdf, printBackground: true }));
}
