/**
 * Bencode (the BitTorrent encoding, BEP 3), as rtpengine's NG control protocol
 * carries it (docs/media.md "The NG protocol"):
 *
 * - byte string: `<length>:<bytes>` (`4:spam`); length in decimal, no sign, no leading zero
 * - integer: `i<decimal>e` (`i-3e`); no leading zero, no `-0`
 * - list: `l<values>e`
 * - dictionary: `d<key><value>…e`; keys are byte strings, written in sorted (raw byte) order
 *
 * The decoder reads what the network sends, so it never throws anything but a
 * {@link BencodeError}, never recurses deeper than `maxDepth`, and never loops:
 * every step consumes at least one byte of a bounded input. Strings decode to
 * Buffers (lossless) or to UTF-8 text (`strings: 'utf8'`, what the NG client uses).
 */

/** A value the encoder accepts: text is written as UTF-8, `undefined` dictionary entries are left out. */
export type BencodeInput = string | Uint8Array | number | bigint | boolean | readonly BencodeInput[] | { readonly [key: string]: BencodeInput | undefined };

/** A decoded value with byte strings as Buffers. */
export type BencodeValue = Buffer | number | BencodeValue[] | { [key: string]: BencodeValue };

/** A decoded value with byte strings as UTF-8 text. */
export type BencodeText = string | number | BencodeText[] | { [key: string]: BencodeText };

/** Either, inside the decoder. */
type Decoded = Buffer | string | number | Decoded[] | { [key: string]: Decoded };

/** Malformed input or a value bencode cannot carry; `offset` is where decoding stopped (-1 when encoding). */
export class BencodeError extends Error {
  readonly code = 'BENCODE_INVALID';
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(offset >= 0 ? `bencode: ${message} at byte ${offset}` : `bencode: ${message}`);
    this.name = 'BencodeError';
  }
}

export interface DecodeOptions {
  /** Byte strings as Buffers (`buffer`, lossless) or as UTF-8 text (`utf8`). @default 'buffer' */
  strings?: 'buffer' | 'utf8';
  /** Deepest nesting of lists and dictionaries accepted. @default 32 */
  maxDepth?: number;
}

const C_0 = 0x30;
const C_9 = 0x39;
const C_COLON = 0x3a;
const C_MINUS = 0x2d;
const C_D = 0x64;
const C_E = 0x65;
const C_I = 0x69;
const C_L = 0x6c;

/** Longest run of digits read for a length or an integer: beyond 2^53 anyway. */
const MAX_DIGITS = 16;

// ---------------------------------------------------------------- encoding

/** Encode a value; dictionary keys are sorted by their UTF-8 bytes, as BEP 3 requires. */
export function encode(value: BencodeInput): Buffer {
  const parts: Buffer[] = [];
  write(value, parts, 0);
  return Buffer.concat(parts);
}

function write(v: BencodeInput, out: Buffer[], depth: number): void {
  if (depth > 64) throw new BencodeError('value nested too deeply to encode', -1);
  if (typeof v === 'string') {
    const b = Buffer.from(v, 'utf8');
    out.push(Buffer.from(`${b.length}:`, 'latin1'), b);
  } else if (v instanceof Uint8Array) {
    out.push(Buffer.from(`${v.length}:`, 'latin1'), Buffer.from(v.buffer, v.byteOffset, v.byteLength));
  } else if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new BencodeError(`cannot encode ${v}: bencode integers are whole numbers`, -1);
    out.push(Buffer.from(`i${v}e`, 'latin1'));
  } else if (typeof v === 'bigint') {
    out.push(Buffer.from(`i${v}e`, 'latin1'));
  } else if (typeof v === 'boolean') {
    // Bencode has no booleans; rtpengine reads "yes"/"no" strings as well as flags.
    const s = v ? 'yes' : 'no';
    out.push(Buffer.from(`${s.length}:${s}`, 'latin1'));
  } else if (Array.isArray(v)) {
    out.push(Buffer.from('l', 'latin1'));
    for (const item of v as readonly BencodeInput[]) write(item, out, depth + 1);
    out.push(Buffer.from('e', 'latin1'));
  } else if (typeof v === 'object' && v !== null) {
    const entries: Array<[Buffer, BencodeInput]> = [];
    for (const [k, val] of Object.entries(v)) {
      if (val !== undefined) entries.push([Buffer.from(k, 'utf8'), val]);
    }
    entries.sort((a, b) => Buffer.compare(a[0], b[0]));
    out.push(Buffer.from('d', 'latin1'));
    for (const [k, val] of entries) {
      out.push(Buffer.from(`${k.length}:`, 'latin1'), k);
      write(val, out, depth + 1);
    }
    out.push(Buffer.from('e', 'latin1'));
  } else {
    throw new BencodeError(`cannot encode a value of type ${v === null ? 'null' : typeof v}`, -1);
  }
}

// ---------------------------------------------------------------- decoding

/** Decode exactly one value filling the whole input (trailing bytes are an error). */
export function decode(input: Uint8Array, opts?: DecodeOptions & { strings?: 'buffer' }): BencodeValue;
export function decode(input: Uint8Array, opts: DecodeOptions & { strings: 'utf8' }): BencodeText;
export function decode(input: Uint8Array, opts: DecodeOptions = {}): BencodeValue | BencodeText {
  const buf = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const d = new Decoder(buf, opts.strings === 'utf8', opts.maxDepth ?? 32);
  const v = d.value(0);
  if (d.pos !== buf.length) throw new BencodeError(`${buf.length - d.pos} trailing byte(s) after the value`, d.pos);
  return v as BencodeValue | BencodeText;
}

/** A cursor over the input (ioredis's RESP decoder style: byte codes, no regexes). */
class Decoder {
  pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly text: boolean,
    private readonly maxDepth: number,
  ) {}

  value(depth: number): Decoded {
    const c = this.peek();
    if (c >= C_0 && c <= C_9) return this.string();
    if (c === C_I) return this.integer();
    if (c === C_L || c === C_D) {
      if (depth >= this.maxDepth) throw new BencodeError(`nested deeper than ${this.maxDepth} levels`, this.pos);
      this.pos++;
      return c === C_L ? this.list(depth + 1) : this.dict(depth + 1);
    }
    throw new BencodeError(`unexpected byte 0x${c.toString(16).padStart(2, '0')}`, this.pos);
  }

  private peek(): number {
    if (this.pos >= this.buf.length) throw new BencodeError('input ends early', this.pos);
    return this.buf[this.pos] as number;
  }

  /** Decimal digits up to `end`; no leading zero unless the number is 0. */
  private digits(what: string): number {
    const start = this.pos;
    let n = 0;
    while (this.pos < this.buf.length) {
      const c = this.buf[this.pos] as number;
      if (c < C_0 || c > C_9) break;
      if (this.pos - start >= MAX_DIGITS) throw new BencodeError(`${what} too long`, start);
      n = n * 10 + (c - C_0);
      this.pos++;
    }
    if (this.pos === start) throw new BencodeError(`${what} has no digits`, start);
    if (this.buf[start] === C_0 && this.pos - start > 1) throw new BencodeError(`${what} has a leading zero`, start);
    if (!Number.isSafeInteger(n)) throw new BencodeError(`${what} too large`, start);
    return n;
  }

  private expect(code: number, what: string): void {
    if (this.peek() !== code) throw new BencodeError(`expected ${what}`, this.pos);
    this.pos++;
  }

  private rawString(): Buffer {
    const at = this.pos;
    const len = this.digits('string length');
    this.expect(C_COLON, "':' after a string length");
    if (len > this.buf.length - this.pos) throw new BencodeError(`string of ${len} bytes runs past the end of the input`, at);
    const s = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return s;
  }

  private string(): Buffer | string {
    const s = this.rawString();
    return this.text ? s.toString('utf8') : Buffer.from(s); // a copy: the caller may reuse its buffer
  }

  private integer(): number {
    this.pos++; // 'i'
    const at = this.pos;
    let negative = false;
    if (this.peek() === C_MINUS) {
      negative = true;
      this.pos++;
    }
    const n = this.digits('integer');
    if (negative && n === 0) throw new BencodeError('integer -0', at);
    this.expect(C_E, "'e' after an integer");
    return negative ? -n : n;
  }

  private list(depth: number): Decoded[] {
    const out: Decoded[] = [];
    while (this.peek() !== C_E) out.push(this.value(depth));
    this.pos++;
    return out;
  }

  private dict(depth: number): Record<string, Decoded> {
    // A null prototype: a key such as "__proto__" from the wire is an ordinary key.
    const out = Object.create(null) as Record<string, Decoded>;
    while (this.peek() !== C_E) {
      const at = this.pos;
      const c = this.peek();
      if (c < C_0 || c > C_9) throw new BencodeError('dictionary key is not a string', at);
      const key = this.rawString().toString('utf8');
      if (Object.prototype.hasOwnProperty.call(out, key)) throw new BencodeError(`duplicate dictionary key ${JSON.stringify(key.slice(0, 40))}`, at);
      if (this.peek() === C_E) throw new BencodeError(`dictionary key ${JSON.stringify(key.slice(0, 40))} has no value`, this.pos);
      out[key] = this.value(depth);
    }
    this.pos++;
    return out;
  }
}
