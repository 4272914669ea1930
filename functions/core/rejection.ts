/**
 * A request refused for what it is, not for anything that went wrong here. Carries the HTTP status and a
 * message that names the problem; the message never echoes a secret.
 */
export class Rejection extends Error {
  override readonly name = 'Rejection';
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 405 | 413 | 415,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const badRequest = (message: string) => new Rejection(400, 'bad_request', message);
