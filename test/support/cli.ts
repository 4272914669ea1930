/**
 * The operator CLI run as an operator runs it: its own process through tsx, with the environment given. A failing
 * command is an answer here, not an error: its output (stdout and stderr) and exit code.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const TSX = join(process.cwd(), 'node_modules', '.bin', 'tsx');

export async function runCli(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<{ stdout: string; code: number }> {
  try {
    const { stdout } = await run(TSX, ['functions/cli/main.ts', ...args], { env });
    return { stdout, code: 0 };
  } catch (error) {
    const failed = error as { stdout: string; stderr: string; code: number };
    return { stdout: failed.stdout + failed.stderr, code: failed.code };
  }
}
