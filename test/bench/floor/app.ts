/** A CDK app holding only the floor function, built by the same house construct as every product function. */
import { App, Stack } from 'aws-cdk-lib';
import { ReceiverFunction } from '../../../infra/constructs/receiver-function';

const app = new App();
const stack = new Stack(app, 'BenchFloor');
new ReceiverFunction(stack, 'floor', {
  entry: 'test/bench/floor/handler.ts',
  description: 'Cold-start floor: the document client and a constant answer',
});
