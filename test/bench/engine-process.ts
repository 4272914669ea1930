/** The embedded engine in a process of its own, so a benchmark measures its client, not the engine's CPU. */
import { startEngine } from '../../infra/local/engine';

const engine = await startEngine();
process.send?.({ endpoint: engine.endpoint });
process.on('disconnect', async () => {
  await engine.stop();
  process.exit(0);
});
