/** mulberry32: a seeded generator of numbers in [0, 1). */
export function prng(seed: number): () => number;

/** Apply 1-4 random mutations to a copy of `src`; `others` are splice partners. */
export function mutate(rand: () => number, src: Buffer, others: ReadonlyArray<Buffer>): Buffer;

/**
 * An endless, reproducible stream of fuzz messages (each at most `maxSize`
 * bytes, default 65 000): mostly mutations of corpus messages, some corpus
 * messages as they are, some raw noise. It never returns.
 */
export function messages(seed: number, corpus: ReadonlyArray<{ data: Buffer }>, maxSize?: number): Generator<Buffer, never, unknown>;
