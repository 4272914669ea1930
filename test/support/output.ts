/**
 * What a test's code writes to standard output and error (log lines, metrics), captured instead of printed.
 */
import { vi } from 'vitest';

export function captureOutput(): { text(): string; restore(): void } {
  const written: string[] = [];
  const record = (chunk: unknown) => {
    written.push(String(chunk));
    return true;
  };
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(record);
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(record);
  return {
    text: () => written.join(''),
    restore: () => {
      out.mockRestore();
      err.mockRestore();
    },
  };
}
