/**
 * Calls the platform places itself (calls/, the B2BUA) meet the proxy here: the B2BUA
 * sends each leg's INVITE into the proxy over an internal flow, and the proxy asks, by
 * the proxy option `originated`, whom the leg is placed for. Both stand on this file;
 * neither imports the other (docs/design.md "Layers").
 */
import type { CallStart } from '../store/calls/calls.js';
import type { AccountRecord, EndpointRecord, SubAccountRecord } from '../store/directory/directory.js';

/** The header by which the edge's own user agent names the hangup cause of a BYE it sends (kept only from internal flows). */
export const HANGUP_CAUSE_HEADER = 'x-sipedge-hangup-cause';

/** The header carrying the call's uuid to the application runtime's leg (internal flows only). */
export const CALL_UUID_HEADER = 'x-sipedge-call-uuid';

/** The record a placed leg gets: its call_uuid, the API request's callbacks, the A leg's call_uuid as bridge_uuid. */
export interface OriginRecord {
  callUuid: string;
  callbacks: CallStart['callbacks'];
  bridgeUuid: string | null;
}

/**
 * A leg of a call the edge places: for whom, what the phone network sees as caller ID,
 * its record, and the hook told once the proxy has admitted it (limits, credit, KYC and
 * policy passed) and is sending it on.
 */
export interface OriginatedCall {
  account: AccountRecord;
  sub: SubAccountRecord | null;
  /** The endpoint the call is placed from (`from` named one), else null (`from` is a number). */
  endpoint: EndpointRecord | null;
  /** The From user: the endpoint's username or the number. */
  user: string;
  /** The account's number shown on calls out through a trunk (already checked to be the account's). */
  callerId: string | null;
  record: OriginRecord;
  admitted(): void;
}
