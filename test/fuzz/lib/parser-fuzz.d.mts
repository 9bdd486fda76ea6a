export interface ParserFuzzOptions {
  /** The repository root, with a trailing slash: the built `dist/` under it is fuzzed. */
  root: string;
  corpus: ReadonlyArray<{ data: Buffer }>;
  seed: number;
  /** How many messages. */
  count: number;
  /** Called every 200 000 messages. */
  onProgress?: (n: number) => void;
}

export interface ParserFuzzResult {
  messages: number;
  /** Messages parseMessage accepted. */
  accepted: number;
  /** Messages parseMessage rejected. */
  rejected: number;
  /** Messages on which something threw. */
  thrown: number;
  /** The first (up to 5) of those: the error's stack and the message's start. */
  thrownSamples: Array<{ error: string; message: string }>;
  /** The slowest message, in ms (best of three re-runs when over 5 ms). */
  slowestMs: number;
  seconds: number;
}

/** Mutation fuzzing of the parser, header parsers, response builder and stream framer, in process. */
export function fuzzParser(o: ParserFuzzOptions): Promise<ParserFuzzResult>;
