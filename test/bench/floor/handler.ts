/**
 * The cold-start floor: the DynamoDB document client, constructed as a receiver's is, a constant answer, and
 * (when the event names a key) the one UpdateItem a receiver's hit makes, so the first hit has a floor too.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';

const client = DynamoDBDocumentClient.from(new DynamoDBClient({}));

export const handler = async (event?: { pk?: string }) => {
  if (event?.pk) {
    await client.send(
      new UpdateCommand({
        TableName: process.env.TABLE_NAME,
        Key: { pk: event.pk, sk: 'FLOOR' },
        UpdateExpression: 'ADD hits :one',
        ExpressionAttributeValues: { ':one': 1 },
      }),
    );
  }
  return { statusCode: 200, body: 'ok' };
};
