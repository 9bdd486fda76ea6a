import { SipError, StoreUnavailableError } from '../errors.js';
import type { Logger } from '../logger.js';
import { parseMessage, type ParseLimits } from '../sip/parser.js';
import { formatVia, getHeader, getListValues, parseCSeq, parseVia, tagOf } from '../sip/headers.js';
import { replaceFirstListValue } from '../sip/message-edit.js';
import { buildResponse } from '../sip/response.js';
import type { SipRequest, Via } from '../sip/message.js';
import type { Flow, MessageSink, SipTransportName, Transport } from '../transport/types.js';
import type { IncomingRequest, Reply, RequestHandler } from './incoming.js';
import type { RequestProcessor } from './request-processor.js';
import type { ServerTransaction } from './server-transaction.js';
import { TransactionLayer } from './transaction-layer.js';
import { ServerTransactionTable, transactionKey } from './server-transaction-table.js';

/** A method handler; throws SipError to refuse. */
export type { RequestHandler };

export interface RouterOptions {
  transports: ReadonlyMap<SipTransportName, Transport>;
  handlers: ReadonlyMap<string, RequestHandler>;
  limits: ParseLimits;
  log: Logger;
  /** Value of the Server header. */
  server: string;
  /**
   * Called before a message is parsed; false drops it unread (banned or
   * rate-limited sources cost almost nothing). Absent = admit everything.
   */
  admit?: (flow: Flow, size: number) => boolean;
  /** Called for every closed stream flow. */
  onFlowClosed?: (flow: Flow) => void;
  /** Metrics hook: one call per final response sent to a request. */
  onResponse?: (method: string, status: number, transport: SipTransportName, startedAt: bigint) => void;
  /**
   * The stateful transaction layer (RFC 3261 §17) shared with the processor;
   * absent = one of its own.
   */
  layer?: TransactionLayer;
  /**
   * Processes every request no local handler takes (the proxy): INVITE, ACK,
   * CANCEL, BYE, MESSAGE, OPTIONS to a user… Absent = those get 405 (CANCEL 481).
   */
  processor?: RequestProcessor;
}

const ALLOW = 'REGISTER, OPTIONS';
const RETRY_AFTER_STORE = '5';

/**
 * Receives every framed message, applies RFC 3261 §18.2.1 Via handling and
 * transaction matching, and dispatches: responses to client transactions
 * (§17.1.3); REGISTER and OPTIONS to the server to local handlers, answered
 * over the flow the request came on; everything else — with its server
 * transaction — to the request processor (the proxy). The only place that
 * turns handler errors into responses.
 */
export class SipRouter implements MessageSink {
  private readonly transactions = new ServerTransactionTable();
  private readonly allow: string;
  /** The stateful transaction layer (client and server transactions of proxied requests). */
  readonly layer: TransactionLayer;

  constructor(private readonly opts: RouterOptions) {
    const methods = new Set([...opts.handlers.keys(), ...(opts.processor?.methods ?? []), 'ACK']);
    this.allow = [...methods].join(', ') || ALLOW;
    this.layer = opts.layer ?? new TransactionLayer({ transports: opts.transports, log: opts.log, server: opts.server });
    this.layer.onFinal = (tx, status) => this.opts.onResponse?.(tx.method, status, tx.flow.transport, tx.startedAt);
  }

  onMessage(data: Buffer, flow: Flow): void {
    if (this.opts.admit && !this.opts.admit(flow, data.length)) return;
    const startedAt = process.hrtime.bigint();
    const parsed = parseMessage(data, this.opts.limits);
    if (!parsed.ok) {
      this.opts.log.debug({ reason: parsed.reason, src: `${flow.remoteAddress}:${flow.remotePort}`, transport: flow.transport }, 'unparseable message');
      // RFC 3261 §16.3 / §8.2.2: answer what can be answered; a response cannot be formed without Via & co.
      const partial = parsed.request;
      if (partial && partial.method !== 'ACK') {
        const version = parsed.reason.startsWith('version');
        this.sendReply(partial, flow, null, version ? 505 : 400, version ? 'Version Not Supported' : reasonText(parsed.reason), []);
      }
      return;
    }
    const msg = parsed.msg;
    if (msg.kind === 'response') {
      // §18.1.2 → §17.1.3; a response matching no client transaction is stray and dropped
      // (RFC 6026: 2xx retransmissions still match the Accepted INVITE client transaction).
      if (!this.layer.receiveResponse(msg) && !this.layer.relayStray(msg, data, flow)) {
        this.opts.log.debug({ status: msg.status, src: `${flow.remoteAddress}:${flow.remotePort}` }, 'stray response dropped');
      }
      return;
    }
    this.onRequest(msg, flow, startedAt);
  }

  /**
   * A message of the edge's own user agent (calls/, over an internal flow): processed like
   * one from the network, without the per-source admission checks.
   */
  inject(data: Buffer, flow: Flow): void {
    const parsed = parseMessage(data, this.opts.limits);
    if (!parsed.ok) {
      this.opts.log.warn({ reason: parsed.reason }, 'internal message not parsed');
      return;
    }
    if (parsed.msg.kind === 'response') {
      // A response to a request another process of the fleet relayed here goes back to it.
      if (!this.layer.receiveResponse(parsed.msg) && !this.layer.relayStray(parsed.msg, data, flow)) {
        this.opts.log.debug({ status: parsed.msg.status }, 'stray internal response dropped');
      }
      return;
    }
    this.onRequest(parsed.msg, flow, process.hrtime.bigint());
  }

  onFlowClosed(flow: Flow): void {
    this.opts.onFlowClosed?.(flow);
  }

  private onRequest(req: SipRequest, flow: Flow, startedAt: bigint): void {
    const vias = getListValues(req, 'via');
    const top = vias.length > 0 ? parseVia(vias[0]) : null;
    const cseq = parseCSeq(getHeader(req, 'cseq') ?? '');
    const callId = getHeader(req, 'call-id') ?? '';
    if (!top || !cseq || callId === '') {
      if (req.method !== 'ACK' && vias.length > 0) this.sendReply(req, flow, null, 400, 'Bad Request', []);
      return;
    }
    // RFC 3261 §18.2.1 received; RFC 3581 §4 rport. Responses go back to the source (symmetric).
    stampVia(top, flow);
    vias[0] = formatVia(top);
    // The request carries the stamped Via from here on: a proxied request is forwarded with it (§16.6).
    replaceFirstListValue(req, 'via', vias[0]);

    const ctx: IncomingRequest = {
      req,
      flow,
      callId,
      cseq,
      via: top,
      received: `sip:${uriHost(flow.remoteAddress)}:${flow.remotePort};transport=${flow.transport}`,
    };
    const processor = this.opts.processor;

    if (req.method === 'ACK') {
      if (!processor) return; // ACKs to our non-2xx finals end nothing we keep
      // §17.2.1: the ACK of a non-2xx final matches the INVITE server transaction; any other
      // ACK (of a 2xx) is end to end and the proxy forwards it (§16.11 / RFC 6026).
      const tx = this.layer.inviteTransaction(ctx);
      if (tx && (tx.state === 'completed' || tx.state === 'confirmed')) tx.ack();
      else processor.onAck(ctx);
      return;
    }
    if (req.method === 'CANCEL' && processor) {
      this.onCancel(ctx, processor, startedAt);
      return;
    }
    const localHandler = this.opts.handlers.get(req.method);
    if (processor && (!localHandler || processor.accepts(ctx))) {
      const { tx, retransmission } = this.layer.serverTransaction(ctx, startedAt);
      if (retransmission) {
        tx.retransmission();
        return;
      }
      Promise.resolve()
        .then(() => processor.onRequest(ctx, tx))
        .catch((err: unknown) => this.fail(tx, err));
      return;
    }

    // Stream transports are reliable: Timer J is zero and clients do not retransmit (§17.2.2).
    let key: string | null = null;
    if (flow.connId === null) {
      key = transactionKey(req.method, top.branch, `${top.host}:${top.port ?? ''}`, callId, cseq.seq, top.branch?.startsWith('z9hG4bK') ? null : tagOf(getHeader(req, 'from')), vias[0]);
      const tx = this.transactions.receive(key);
      if (tx.state === 'trying') return;
      if (tx.state === 'completed') {
        this.send(flow, tx.response);
        return;
      }
    }

    const handler = this.opts.handlers.get(req.method);
    if (!handler) {
      const status = req.method === 'CANCEL' ? 481 : 405;
      const reason = status === 481 ? 'Call/Transaction Does Not Exist' : 'Method Not Allowed';
      this.finish(req, flow, vias, key, status, reason, status === 405 ? [['Allow', this.allow]] : [], startedAt);
      return;
    }
    handler(ctx).then(
      (reply) => this.finish(req, flow, vias, key, reply.status, reply.reason, reply.headers, startedAt),
      (err: unknown) => {
        const r = this.replyForError(err, req.method, 'request handler failed');
        this.finish(req, flow, vias, key, r.status, r.reason, r.headers, startedAt);
      },
    );
  }

  /**
   * RFC 3261 §9.2 / §16.10: a CANCEL matching an INVITE server transaction is
   * answered 200 at once (with the To tag of our responses to the INVITE), and
   * the processor cancels the pending branches; no match → 481.
   */
  private onCancel(ctx: IncomingRequest, processor: RequestProcessor, startedAt: bigint): void {
    const tx = this.layer.inviteTransaction(ctx);
    const vias = getListValues(ctx.req, 'via');
    if (!tx) {
      this.finish(ctx.req, ctx.flow, vias, null, 481, 'Call/Transaction Does Not Exist', [], startedAt);
      return;
    }
    const response = buildResponse(ctx.req, 200, 'OK', { toTag: tx.toTag, headers: [['Server', this.opts.server]] });
    this.send(ctx.flow, response);
    this.opts.onResponse?.('CANCEL', 200, ctx.flow.transport, startedAt);
    if (tx.finalSent || tx.cancelled) return;
    tx.cancelled = true;
    processor.onCancel(ctx, tx);
  }

  /** A processor's refusal or fault, answered on its server transaction (same mapping as for handlers). */
  private fail(tx: ServerTransaction, err: unknown): void {
    if (tx.finalSent) {
      this.opts.log.error({ err, method: tx.method }, 'request processor failed after the final response');
      return;
    }
    const r = this.replyForError(err, tx.method, 'request processor failed');
    tx.respond(r.status, r.reason, r.headers);
  }

  /**
   * The one mapping of a failure to a SIP response, for handlers and processors
   * alike: a SipError is its own answer, a store that does not answer is 503 with
   * Retry-After (the client tries again soon), anything else is a fault: 500,
   * logged as an error.
   */
  private replyForError(err: unknown, method: string, what: string): Reply {
    if (err instanceof SipError) return { status: err.status, reason: err.reason, headers: err.headers };
    if (err instanceof StoreUnavailableError) {
      this.opts.log.warn({ err: errMessage(err), method }, 'store unavailable');
      return { status: 503, reason: 'Service Unavailable', headers: [['Retry-After', RETRY_AFTER_STORE]] };
    }
    this.opts.log.error({ err, method }, what);
    return { status: 500, reason: 'Server Internal Error', headers: [] };
  }

  private finish(
    req: SipRequest,
    flow: Flow,
    vias: string[],
    key: string | null,
    status: number,
    reason: string,
    headers: Array<[string, string]>,
    startedAt: bigint,
  ): void {
    const response = this.sendReply(req, flow, vias, status, reason, headers);
    // 503 from a store fault is not remembered: a retransmission may find the store back.
    if (key !== null) {
      if (status === 503) this.transactions.abandon(key);
      else this.transactions.complete(key, response);
    }
    this.opts.onResponse?.(req.method, status, flow.transport, startedAt);
  }

  private sendReply(
    req: SipRequest,
    flow: Flow,
    vias: string[] | null,
    status: number,
    reason: string,
    headers: Array<[string, string]>,
  ): Buffer {
    const all: Array<[string, string]> = [...headers, ['Server', this.opts.server]];
    if (status === 405 || (status === 200 && req.method === 'OPTIONS')) {
      if (!headers.some(([n]) => n === 'Allow')) all.push(['Allow', this.allow]);
    }
    const response = buildResponse(req, status, reason, {
      toTag: this.layer.newTag(),
      headers: all,
      vias: vias ?? undefined,
    });
    this.send(flow, response);
    return response;
  }

  private send(flow: Flow, data: Buffer): void {
    const t = this.opts.transports.get(flow.transport);
    if (!t || !t.send(flow, data)) {
      this.opts.log.debug({ connId: flow.connId, transport: flow.transport }, 'response dropped: flow gone');
    }
  }

  /** Open transactions: server transactions of local handlers, plus the proxy's server and client transactions (metrics, admission). */
  /** Forget every remembered completed transaction at once (benchmarks: the memory they held). */
  forgetTransactions(): void {
    this.transactions.rotate();
    this.transactions.rotate();
  }

  get pendingTransactions(): number {
    const proxied = this.layer.size;
    return this.transactions.size + proxied.server + proxied.client;
  }

  stop(): void {
    this.transactions.stop();
    this.layer.stop();
  }
}

/** RFC 3261 §18.2.1 and RFC 3581 §4: record where the request really came from. */
function stampVia(via: Via, flow: Flow): void {
  if (via.params.has('rport')) {
    via.params.set('received', flow.remoteAddress);
    via.params.set('rport', String(flow.remotePort));
  } else if (stripBrackets(via.host) !== flow.remoteAddress) {
    via.params.set('received', flow.remoteAddress);
  }
}

function stripBrackets(h: string): string {
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

function uriHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}


function reasonText(reason: string): string {
  // Reason phrases are TEXT-UTF8 but must not carry CR/LF; keep them short.
  return `Bad Request (${reason.replace(/[\r\n]/g, ' ').slice(0, 80)})`;
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
