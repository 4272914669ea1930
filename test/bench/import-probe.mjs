// Imports one bundle in a fresh process, as the Lambda runtime does, and prints how long that took in ms
// (module evaluation, client construction included). Plain JavaScript, so no loader adds to the figure.
const started = performance.now();
await import(process.argv[2]);
process.stdout.write(`${performance.now() - started}\n`);
