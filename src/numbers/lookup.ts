/**
 * What routing (src/routing/) reads of the numbers capability: who owns a number and
 * where it routes. The numbers capability (src/numbers/index.ts) implements it on its
 * store service (src/store/numbers/); routing never writes numbers.
 */

/** A number owned by an account, as routing sees it. E.164 always with its `+`. */
export interface NumberRoute {
  e164: string;
  /** The owning (parent) account. */
  authId: string;
  /** The sub-account it was handed to (assign-subaccount), or null. */
  subAccount: string | null;
  /** `inactive`: its rental is unpaid (or an operator blocked it) — it does not route. */
  status: 'active' | 'inactive';
  /** At most one of the three routes is set; none = the number has no route yet. */
  endpointId: string | null;
  applicationId: string | null;
  /** A trunk of the same account: inbound calls to the number are forwarded out through it. */
  trunkGroupId: string | null;
}

export interface NumberLookup {
  /** The owned number `e164` (normalised, with `+`), or null when nobody owns it (unsold or unknown). */
  route(e164: string): Promise<NumberRoute | null>;
  /**
   * The number an endpoint calls out as: the one routed to it (`POST …/numbers/{e164}/endpoint`);
   * when several are, the earliest routed. Null when none.
   */
  callerIdOf(authId: string, endpointId: string): Promise<string | null>;
}
