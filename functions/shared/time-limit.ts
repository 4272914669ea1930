/**
 * Waiting for something with someone waiting on us: what `pending` settles to, or, once `ms` have passed first,
 * what `late` gives (or throws). The timer is cleared either way. Given up on, `pending` may still settle; nothing
 * waits for it, and a rejection then is not left unhandled.
 */
export async function settleWithin<T, U>(pending: Promise<T>, ms: number, late: () => U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      pending,
      new Promise<U>((resolve, reject) => {
        timer = setTimeout(() => {
          try {
            resolve(late());
          } catch (error) {
            reject(error);
          }
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    pending.catch(() => undefined);
  }
}
