/**
 * The loop of a store-backed worker (the callback dispatcher, the messaging send worker):
 * `tick` runs every `everyMs` once started, and at once on `wake()` (something was just
 * queued); never two ticks at a time — a wake during a tick runs one more tick after it.
 */
export class Poller {
  #timer: NodeJS.Timeout | null = null;
  #ticking = false;
  #again = false;
  #stopped = false;

  /** `everyMs` must be a positive number: setInterval treats undefined or 0 as 1 ms. */
  constructor(
    private readonly tick: () => Promise<void>,
    private readonly everyMs: number,
  ) {
    if (!(everyMs > 0)) throw new RangeError(`poll interval must be positive, got ${everyMs}`);
  }

  get started(): boolean {
    return this.#timer !== null;
  }

  start(): void {
    if (this.#timer || this.#stopped) return;
    this.#timer = setInterval(() => this.wake(), this.everyMs);
    this.#timer.unref();
  }

  wake(): void {
    if (this.#stopped) return;
    if (this.#ticking) {
      this.#again = true;
      return;
    }
    this.#ticking = true;
    void this.tick().finally(() => {
      this.#ticking = false;
      if (this.#again) {
        this.#again = false;
        this.wake();
      }
    });
  }

  /** No tick starts after this (one running finishes on its own). */
  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
