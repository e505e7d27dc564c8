/**
 * `promise`'s outcome, or else what `late()` gives (a value, or the error it throws) once `ms` have passed.
 * `promise` is not cancelled (a caller that can cancel does so in `late`); its rejection after the time
 * limit is ignored, not left unhandled.
 */
export async function within<T, L = never>(promise: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const timeUp = new Promise<L>((resolve, reject) => {
    timer = setTimeout(
      () => {
        try {
          resolve(late());
        } catch (error) {
          reject(error);
        }
      },
      Math.max(0, ms),
    );
  });
  promise.catch(() => {}); // observed so that a rejection after the time is up is not unhandled; raced below
  try {
    return await Promise.race([promise, timeUp]);
  } finally {
    clearTimeout(timer);
  }
}
