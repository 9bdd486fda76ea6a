/** A connection whose reading can be paused (net.Socket, ws.WebSocket). */
export interface PausableSource {
  pause(): void;
  resume(): void;
  isOpen(): boolean;
}

/** Messages of one connection handled per turn of the event loop. */
export const MESSAGES_PER_TURN = 16;

/**
 * Delivers the messages of one connection at most `perTurn` per turn of the
 * event loop, pausing the connection meanwhile, so one 64 KB read of tiny
 * messages (or a burst of WebSocket frames) cannot hold the loop or starve the
 * other connections. The budget is counted per turn, not per read.
 */
export class FairQueue<T> {
  #items: T[] = [];
  #next = 0;
  #used = 0;
  #waiting = false;
  #resetScheduled = false;

  /** @param deliver handles one item; false drops the rest (the connection is being closed) */
  constructor(
    private readonly source: PausableSource,
    private readonly deliver: (item: T) => boolean,
    private readonly perTurn: number = MESSAGES_PER_TURN,
  ) {}

  push(items: readonly T[]): void {
    for (const i of items) this.#items.push(i);
    this.#drain();
  }

  #drain(): void {
    if (this.#waiting) return;
    while (this.#next < this.#items.length) {
      if (this.#used >= this.perTurn) {
        this.#waitForNextTurn();
        return;
      }
      this.#used++;
      if (!this.deliver(this.#items[this.#next++] as T)) break;
    }
    this.#items = [];
    this.#next = 0;
    if (this.#used > 0 && !this.#resetScheduled) {
      this.#resetScheduled = true;
      setImmediate(() => {
        this.#resetScheduled = false;
        if (!this.#waiting) this.#used = 0;
      });
    }
  }

  #waitForNextTurn(): void {
    this.#waiting = true;
    this.source.pause();
    setImmediate(() => {
      this.#waiting = false;
      this.#used = 0;
      if (!this.source.isOpen()) return;
      this.#drain();
      if (!this.#waiting) this.source.resume();
    });
  }
}
