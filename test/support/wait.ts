/**
 * Polls `fn` every `everyMs` until it gives something other than undefined (a
 * throw counts as not yet) and returns it; after `timeoutMs`, fails naming `what`.
 */
export async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000, everyMs = 50): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await Promise.resolve()
      .then(fn)
      .catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
