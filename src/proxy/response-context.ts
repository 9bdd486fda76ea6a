import type { ClientTransaction, ClientTransactionUser } from '../core/client-transaction.js';
import type { Destination } from '../core/destination.js';
import type { ServerTransaction } from '../core/server-transaction.js';
import type { TransactionLayer } from '../core/transaction-layer.js';
import { unrefTimer } from '../core/timers.js';
import type { Logger } from '../logger.js';
import { getHeader, getHeaders, getListValues, tagOf } from '../sip/headers.js';
import type { SipRequest, SipResponse } from '../sip/message.js';
import { cloneResponse, setHeader, shiftListValue } from '../sip/message-edit.js';
import { serializeMessage } from '../sip/response.js';

/** A final outcome of one branch: a response received, or one stood in for it (timeout, transport error, CANCEL). */
export interface BranchFinal {
  status: number;
  reason: string;
  /** The response as received, our Via removed; null for an outcome generated here. */
  response: SipResponse | null;
}

interface Branch {
  tx: ClientTransaction | null;
  /** The request as sent on this branch (our Via on top once sent). */
  request: SipRequest;
  destination: Destination;
  /** A provisional response arrived: a CANCEL may now be sent (RFC 3261 §9.1). */
  provisional: boolean;
  final: BranchFinal | null;
  cancel: 'none' | 'pending' | 'sent';
  /** The Reason (RFC 3326) for a CANCEL still pending on a provisional response. */
  cancelReason: string | null;
  /** The last 2xx of this branch rewritten by transformUp: its To tag, body as received and as sent. */
  rewritten?: { toTag: string | null; received: Buffer; sent: Buffer };
  /**
   * Its 3xx was recursed on (§16.7 step 4): every Contact became a branch of its own, so
   * the contactless response is not a candidate for the best response.
   */
  recursed?: boolean;
  /** Headers upstream responses of this branch get back as the caller sent them (see {@link ForkOptions.restore}). */
  restore?: ReadonlyArray<readonly [string, string]>;
  /** No response at all within the branch's answer timeout: given 408 here (and CANCELed once it speaks). */
  answerTimer?: NodeJS.Timeout | null;
}

export interface ResponseContextEvents {
  /** The first 2xx to an INVITE went upstream: the call is up (`branch`: the index of the branch that answered). */
  onAnswered?(res: SipResponse, branch: number): void;
  /** The first provisional response other than 100 went upstream (an INVITE rings). */
  onRinging?(status: number): void;
  /**
   * The final response went upstream (2xx or the best of the branches); `endedBy`
   * says when the edge ended the attempt itself: the caller's CANCEL, or the
   * no-answer timeout.
   */
  onFinal?(status: number, endedBy?: 'caller-cancel' | 'no-answer'): void;
}

export interface ResponseContextOptions {
  layer: TransactionLayer;
  log: Logger;
  server: ServerTransaction;
  /** INVITE: give up on every branch after this long without a final response (the ring / no-answer timeout), ms. */
  noAnswerMs?: number;
  /**
   * What a branch whose flow is gone counts as (the transport error of §16.9 is a 503,
   * which §16.7 would turn into 500): 480 for a registered contact, 430 Flow Failed
   * in a dialog (RFC 5626 §5.3). @default 503
   */
  flowFailure?: { status: number; reason: string };
  events?: ResponseContextEvents;
  /**
   * Rewrites a response of branch `branch` (its index in fork order) before it goes
   * upstream, e.g. its SDP through the media relay. When set, every response goes
   * upstream in the order received, each after the rewrites before it.
   */
  transformUp?: (up: SipResponse, branch: number) => Promise<void>;
  /**
   * A 3xx arrived on a branch and no 2xx has gone upstream (RFC 3261 §16.7 step 4,
   * §16.5): the handler may fork new branches on this context for the Contacts it
   * follows and resolves with how many it added. With at least one, the 3xx is not
   * a candidate for the best response; with none, it is kept as received. Absent =
   * 3xx responses are candidates like any other (passed upstream when best).
   */
  redirect?: (up: SipResponse) => Promise<number>;
  /**
   * A branch ended without a 2xx (any final: a response ≥ 300 the redirect handler did not
   * take, a timeout, a transport error) while no 2xx has gone upstream: the handler may fork
   * the next branches (the next gateway of a trunk, the same one with credentials) and
   * resolves with how many it added. With at least one, the ended branch is no candidate
   * for the best response. Absent = nothing replaces a failed branch.
   */
  failover?: (final: BranchFinal, branch: number) => Promise<number>;
}

/** Per-branch options of {@link ResponseContext.fork}. */
export interface ForkOptions {
  /** RFC 3261 §16.6 step 8 loop detection hash. */
  loop?: string;
  /** Give the branch 503 (generated here) when nothing at all (not even a 100) came back within this many ms. */
  answerTimeoutMs?: number;
  /**
   * Headers whose value responses of this branch carry upstream: what the edge changed on
   * the way down (a credential retry's CSeq one up, a From naming the caller ID) is given
   * back as the caller sent it.
   */
  restore?: ReadonlyArray<readonly [string, string]>;
}

/** The destination of a held branch (never sent to). */
const HELD = { transport: 'udp', address: '0.0.0.0', port: 0, connId: null } as Destination;

/** A client transaction user that wants nothing of its responses (CANCELs, the edge's own BYEs). */
export const NO_OP_USER: ClientTransactionUser = { onResponse() {}, onFailure() {} };
const COMPLETED_ELSEWHERE = 'SIP;cause=200;text="Call completed elsewhere"';
// §16.7 step 6: within 4xx, these carry information the client can act on.
const PREFERRED_4XX = [401, 407, 415, 420, 484];

/**
 * The response context of one proxied request (RFC 3261 §16.7): its branches
 * (one client transaction each, forked in parallel), provisional responses
 * forwarded as they come, the first 2xx forwarded at once with the other
 * branches CANCELed, and — once every branch has a final outcome — the best
 * final response forwarded (§16.7 step 6).
 */
export class ResponseContext implements ClientTransactionUser {
  private readonly branches: Branch[] = [];
  private answered = false;
  private noAnswer: NodeJS.Timeout | null = null;
  private cancelGuard: NodeJS.Timeout | null = null;
  private readonly isInvite: boolean;
  private rang = false;
  /** A final response is on its way upstream (it may wait for a rewrite): no other is chosen. */
  private finalChosen = false;
  private endedBy: 'caller-cancel' | 'no-answer' | undefined;
  /** Upstream sends waiting for a rewrite (transformUp), in order. */
  private upstream: Promise<void> = Promise.resolve();
  /** 3xx responses whose Contacts the redirect handler is still looking at: no best response meanwhile. */
  private redirecting = 0;

  constructor(private readonly opts: ResponseContextOptions) {
    this.isInvite = opts.server.method === 'INVITE';
    if (this.isInvite && opts.noAnswerMs !== undefined) {
      this.noAnswer = unrefTimer(() => this.timeout(), opts.noAnswerMs);
    }
  }

  /**
   * Sends `up` (from branch `b`, or a chosen final) upstream: at once, or — with a
   * transformer — after it and every earlier response were rewritten.
   */
  private sendUp(up: SipResponse, b: Branch | null, check: () => boolean = () => true): void {
    const server = this.opts.server;
    const t = this.opts.transformUp;
    if (!t) {
      server.forward(up, serializeMessage(up));
      return;
    }
    const index = b ? this.branches.indexOf(b) : -1;
    this.upstream = this.upstream
      .then(() => (b && index >= 0 && up.body.length > 0 ? this.rewrite(up, b, index, t) : undefined))
      .catch((err: unknown) => this.opts.log.warn({ status: up.status, err: err instanceof Error ? err.message : String(err) }, 'response rewrite failed; sent as received'))
      .then(() => {
        if (check()) server.forward(up, serializeMessage(up));
      });
  }

  /**
   * Rewrites `up` with the transformer. A 2xx the callee retransmits (no ACK yet;
   * RFC 6026 has it forwarded) gets the first one's rewrite: one rewrite per answer —
   * for the media relay, one NG request, not one per retransmission.
   */
  private async rewrite(up: SipResponse, b: Branch, index: number, t: NonNullable<ResponseContextOptions['transformUp']>): Promise<void> {
    const final2xx = up.status >= 200 && up.status < 300;
    const toTag = final2xx ? tagOf(getHeader(up, 'to')) : null;
    const last = b.rewritten;
    if (final2xx && last && last.toTag === toTag && last.received.equals(up.body)) {
      up.body = last.sent;
      return;
    }
    const received = up.body;
    await t(up, index);
    if (final2xx) b.rewritten = { toTag, received, sent: up.body };
  }

  /** Sends the request on a new branch (§16.6 step 10: a client transaction per target). */
  fork(request: SipRequest, destination: Destination, opts: string | ForkOptions = {}): void {
    const o: ForkOptions = typeof opts === 'string' ? { loop: opts } : opts;
    const b: Branch = { tx: null, request, destination, provisional: false, final: null, cancel: 'none', cancelReason: null, restore: o.restore };
    this.branches.push(b);
    b.tx = this.opts.layer.request(request, destination, this, { loop: o.loop });
    if (o.answerTimeoutMs !== undefined) {
      b.answerTimer = unrefTimer(() => {
        b.answerTimer = null;
        if (b.final !== null || b.provisional) return;
        // The next hop is not answering at all: unavailable (not the callee's no-answer, 408).
        b.final = { status: 503, reason: 'Service Unavailable', response: null };
        this.cancelBranch(b, null);
        this.branchEnded(b);
      }, o.answerTimeoutMs);
    }
  }

  /**
   * A branch whose target is not reachable yet (a sleeping device being woken by a push,
   * RFC 8599): it counts as pending — no best response is chosen while it waits — until
   * `work` resolves with how many branches it forked for it (none: it ends as `otherwise`).
   * A caller's CANCEL or the no-answer timeout ends it like any branch not yet answered.
   */
  hold(work: Promise<number>, otherwise: { status: number; reason: string }): void {
    const request = { kind: 'request', method: this.opts.server.method, uri: '', headers: [], body: Buffer.alloc(0) } as unknown as SipRequest;
    const b: Branch = { tx: null, request, destination: HELD, provisional: false, final: null, cancel: 'none', cancelReason: null };
    this.branches.push(b);
    void work
      .then(
        (added) => {
          if (added > 0) b.recursed = true;
          b.final ??= { ...otherwise, response: null };
        },
        (err: unknown) => {
          b.final ??= { ...otherwise, response: null };
          this.opts.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'held branch failed');
        },
      )
      .finally(() => this.maybeFinish());
  }

  /** New branches may still be added (no 2xx forwarded, no final chosen, not ended by CANCEL or timeout). */
  get open(): boolean {
    return !this.answered && !this.finalChosen && this.endedBy === undefined && !this.opts.server.finalSent;
  }

  /** No branch could be tried: answer with this (480 and the like). */
  get size(): number {
    return this.branches.length;
  }

  private branchOf(tx: ClientTransaction): Branch | undefined {
    return this.branches.find((b) => b.tx === tx);
  }

  onResponse(res: SipResponse, tx: ClientTransaction): void {
    const b = this.branchOf(tx);
    if (!b) return;
    if (b.answerTimer) {
      clearTimeout(b.answerTimer);
      b.answerTimer = null;
    }
    // §16.7 step 3: remove the topmost Via (ours); what remains goes upstream.
    const up = cloneResponse(res);
    shiftListValue(up, 'via');
    if (b.restore) for (const [n, v] of b.restore) setHeader(up, n, v);
    if (getListValues(up, 'via').length === 0) return; // a response to us (cannot happen for forwarded requests)
    const server = this.opts.server;
    const s = res.status;

    if (s < 200) {
      b.provisional = true;
      if (b.cancel === 'pending') this.sendCancel(b, b.cancelReason);
      if (b.final !== null) return; // given up on already (answer timeout): CANCELed, nothing goes up
      // §16.7 step 5: provisional responses other than 100 are forwarded immediately.
      if (s > 100 && !server.finalSent) {
        this.sendUp(up, b, () => !server.finalSent);
        if (!this.rang) {
          this.rang = true;
          this.opts.events?.onRinging?.(s);
        }
      }
      return;
    }
    if (s < 300) {
      b.final ??= { status: s, reason: res.reason, response: up };
      // §16.7 step 5: every 2xx to an INVITE is forwarded immediately (RFC 6026: even after the first).
      if (this.isInvite) {
        this.sendUp(up, b);
        if (!this.answered) {
          this.answered = true;
          this.stopTimers();
          this.opts.events?.onAnswered?.(up, this.branches.indexOf(b));
          this.opts.events?.onFinal?.(s);
          // §16.7 step 10: cancel all pending branches once a 2xx has been forwarded.
          for (const other of this.branches) if (other !== b && other.final === null) this.cancelBranch(other, COMPLETED_ELSEWHERE);
        }
      } else if (!server.finalSent && !this.finalChosen) {
        // Through sendUp: a 2xx to an UPDATE carries an SDP answer the media relay rewrites.
        this.finalChosen = true;
        this.sendUp(up, b, () => !server.finalSent);
        this.stopTimers();
        this.opts.events?.onFinal?.(s);
      }
      return;
    }
    if (b.final !== null) return; // this branch was already given an outcome here (timeout, CANCEL)
    b.final = { status: s, reason: res.reason, response: up };
    const redirect = this.opts.redirect;
    if (s < 400 && redirect && !this.answered && !this.finalChosen && !server.finalSent && this.endedBy === undefined) {
      this.redirecting++;
      void redirect(up)
        .then(
          (added) => {
            if (added > 0) b.recursed = true;
          },
          (err: unknown) => this.opts.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'redirect not followed'),
        )
        .finally(() => {
          this.redirecting--;
          this.maybeFinish();
        });
      return;
    }
    // §16.7 step 5 (6xx): the proxy SHOULD cancel all pending branches.
    if (s >= 600 && this.isInvite) for (const other of this.branches) if (other.final === null) this.cancelBranch(other, null);
    this.branchEnded(b);
  }

  /** A branch has its final outcome: the failover handler may replace it; then maybe the best goes up. */
  private branchEnded(b: Branch): void {
    const failover = this.opts.failover;
    if (!failover || b.final === null || !this.open) {
      this.maybeFinish();
      return;
    }
    this.redirecting++;
    void failover(b.final, this.branches.indexOf(b))
      .then(
        (added) => {
          if (added > 0) b.recursed = true;
        },
        (err: unknown) => this.opts.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'failover not followed'),
      )
      .finally(() => {
        this.redirecting--;
        this.maybeFinish();
      });
  }

  onFailure(tx: ClientTransaction, status: 408 | 503): void {
    const b = this.branchOf(tx);
    if (!b || b.final !== null) return;
    // §16.7 step 1 (Timer B/F → 408) and §16.9 (transport error → 503, or what the TU says it means).
    if (b.answerTimer) clearTimeout(b.answerTimer);
    const flow = this.opts.flowFailure ?? { status: 503, reason: 'Service Unavailable' };
    b.final = status === 408 ? { status, reason: 'Request Timeout', response: null } : { ...flow, response: null };
    this.branchEnded(b);
  }

  /**
   * The caller CANCELed (§16.10): pending branches are CANCELed. A branch that
   * has had no provisional response yet cannot be (§9.1); it is given 487 here
   * and CANCELed when its first provisional response comes.
   */
  cancelByCaller(): void {
    if (this.answered) return;
    this.endedBy ??= 'caller-cancel';
    for (const b of this.branches) {
      if (b.final !== null) continue;
      if (!b.provisional) b.final = { status: 487, reason: 'Request Terminated', response: null };
      this.cancelBranch(b, null);
    }
    // A UAS that answers the CANCEL but never the INVITE must not hold the caller forever.
    this.cancelGuard = unrefTimer(() => {
      for (const b of this.branches) b.final ??= { status: 487, reason: 'Request Terminated', response: null };
      this.maybeFinish();
    }, 64 * this.opts.layer.timers.t1);
    this.maybeFinish();
  }

  /** The no-answer timeout: every pending branch gets 408 and is CANCELed (§16.8 Timer C). */
  private timeout(): void {
    this.noAnswer = null;
    if (this.answered) return;
    this.endedBy ??= 'no-answer';
    for (const b of this.branches) {
      if (b.final !== null) continue;
      b.final = { status: 408, reason: 'Request Timeout', response: null };
      this.cancelBranch(b, null);
    }
    this.maybeFinish();
  }

  private cancelBranch(b: Branch, reason: string | null): void {
    if (b.cancel !== 'none' || !this.isInvite) return;
    if (b.provisional) {
      this.sendCancel(b, reason);
    } else {
      b.cancel = 'pending';
      b.cancelReason = reason;
    }
  }

  /** RFC 3261 §9.1: the CANCEL repeats the INVITE's Request-URI, Call-ID, From, To, CSeq number, Route, and its branch. */
  private sendCancel(b: Branch, reason: string | null): void {
    if (!b.tx || b.tx.state === 'terminated' || b.tx.state === 'completed' || b.tx.state === 'accepted') {
      b.cancel = 'sent';
      return;
    }
    b.cancel = 'sent';
    const inv = b.tx.request;
    const seq = (getHeader(inv, 'cseq') ?? '').trim().split(/\s+/)[0];
    const headers = [
      { name: 'max-forwards', value: '70' },
      { name: 'from', value: getHeader(inv, 'from') ?? '' },
      { name: 'to', value: getHeader(inv, 'to') ?? '' },
      { name: 'call-id', value: getHeader(inv, 'call-id') ?? '' },
      { name: 'cseq', value: `${seq} CANCEL` },
    ];
    for (const r of getHeaders(inv, 'route')) headers.push({ name: 'route', value: r });
    if (reason) headers.push({ name: 'reason', value: reason });
    const cancel: SipRequest = { kind: 'request', method: 'CANCEL', uri: inv.uri, headers, body: Buffer.alloc(0) };
    this.opts.layer.request(cancel, b.destination, NO_OP_USER, { branch: b.tx.branch });
  }

  /** Once every branch has a final outcome, the best one goes upstream (§16.7 step 6). */
  private maybeFinish(): void {
    const server = this.opts.server;
    if (server.finalSent || this.answered || this.finalChosen || this.redirecting > 0) return;
    if (this.branches.some((b) => b.final === null)) return;
    this.finalChosen = true;
    this.stopTimers();
    // §16.7 step 4: a 3xx whose Contacts all became branches is no candidate (they answer for it).
    const candidates = this.branches.filter((b) => !b.recursed);
    const finals = (candidates.length > 0 ? candidates : this.branches).map((b) => b.final as BranchFinal);
    const best = finals[chooseBest(finals.map((f) => f.status))] ?? { status: 408, reason: 'Request Timeout', response: null };
    this.opts.log.debug({ method: server.method, status: best.status, branches: finals.map((f) => f.status) }, 'best response');
    if (best.status === 503 && best.response) {
      // "If the selected response is a 503 (Service Unavailable), the proxy MUST generate a 500":
      // a downstream server's overload is not ours. A 503 the edge generated (no next hop
      // answered) is its own and goes up as 503.
      server.respond(500, 'Server Internal Error');
    } else if (best.response) {
      const r = best.response;
      this.sendUp(r, this.branches.find((x) => x.final?.response === r) ?? null);
    } else {
      server.respond(best.status, best.reason);
    }
    this.opts.events?.onFinal?.(best.status === 503 && best.response ? 500 : best.status, this.endedBy);
  }

  private stopTimers(): void {
    for (const b of this.branches) if (b.answerTimer) clearTimeout(b.answerTimer);
    if (this.noAnswer) clearTimeout(this.noAnswer);
    if (this.cancelGuard) clearTimeout(this.cancelGuard);
    this.noAnswer = this.cancelGuard = null;
  }
}

/**
 * Index of the best of several final responses (RFC 3261 §16.7 step 6): a 6xx
 * if any; else the lowest class, within 4xx preferring 401, 407, 415, 420, 484;
 * else the first of the class. -1 for none.
 */
export function chooseBest(statuses: readonly number[]): number {
  if (statuses.length === 0) return -1;
  const six = statuses.findIndex((s) => s >= 600);
  if (six >= 0) return six;
  const lowestClass = Math.min(...statuses.map((s) => Math.floor(s / 100)));
  if (lowestClass === 4) {
    for (const p of PREFERRED_4XX) {
      const i = statuses.indexOf(p);
      if (i >= 0) return i;
    }
  }
  return statuses.findIndex((s) => Math.floor(s / 100) === lowestClass);
}
