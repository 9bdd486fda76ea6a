/** One seed message: its origin (`sip/…`, `rfc4475/…`, `synthetic/…`) and its bytes. */
export interface CorpusEntry {
  name: string;
  data: Buffer;
}

/** Every fixture message (test/fixtures/sip, test/fixtures/rfc4475) plus the synthetic ones. */
export function loadCorpus(): CorpusEntry[];
