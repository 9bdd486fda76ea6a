/**
 * The trunks store service (docs/trunks.md): an account's SIP trunks and what belongs
 * to each — digest credentials, IP ACL entries, origination URIs. Every child names
 * one trunk of one account; credential usernames are unique across the platform.
 * Records are kept as the capability (src/trunks/) writes them; the store checks only
 * what must be atomic: the trunk a child names exists on that account, and a username
 * is not taken. Passwords never reach the store in the clear: a credential holds its
 * HA1 values and the password sealed by the server's SecretBox.
 */
import type { TrunkType } from '../../trunks/lookup.js';

export type TrunkTransport = 'udp' | 'tcp' | 'tls';

export interface TrunkRecord {
  trunkId: string;
  authId: string;
  name: string;
  trunkType: TrunkType;
  enabled: boolean;
  /** 0 = no limit. */
  maxConcurrentCalls: number;
  /** 0 = no limit. */
  cpsLimit: number;
  description: string;
  transport: TrunkTransport;
  secure: boolean;
  inboundDestination: string | null;
  /** The vendor's links to children of this trunk (null = none). */
  credentialUuid: string | null;
  ipaclUuid: string | null;
  primaryUriUuid: string | null;
  fallbackUriUuid: string | null;
  /** The vendor's recording/webhook settings, kept and echoed (the edge does not act on them yet). */
  vendor: Record<string, string | boolean>;
  createdAt: string;
  updatedAt: string;
}

interface ChildBase {
  id: string;
  authId: string;
  trunkId: string;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface TrunkCredentialRecord extends ChildBase {
  username: string;
  /** hex MD5(username:<SIP_DOMAIN>:password) */
  ha1Md5: string;
  /** hex SHA-256(username:<SIP_DOMAIN>:password) */
  ha1Sha256: string;
  /** The password sealed (`enc:v1:…`), bound to the credential id. */
  sealedPassword: string;
}

export interface IpAclRecord extends ChildBase {
  name: string;
  /** Normalised CIDR (`192.0.2.0/24`, `2001:db8::/32`; a plain address gets /32 or /128). */
  ipAddress: string;
  description: string;
}

export interface OriginationUriRecord extends ChildBase {
  name: string;
  uri: string;
  priority: number;
  weight: number;
  transport: TrunkTransport;
  description: string;
}

export interface ChildRecords {
  credential: TrunkCredentialRecord;
  ipacl: IpAclRecord;
  uri: OriginationUriRecord;
}
export type ChildKind = keyof ChildRecords;
export const CHILD_KINDS: readonly ChildKind[] = ['credential', 'ipacl', 'uri'];

export type PutChildResult = 'ok' | 'no_trunk' | 'username_taken';

export interface TrunkStore {
  /** Add a trunk (its id is new). */
  createTrunk(t: TrunkRecord): Promise<void>;
  /** The trunk of any account, or null. */
  getTrunk(trunkId: string): Promise<TrunkRecord | null>;
  /** An account's trunks, oldest first. */
  listTrunks(authId: string): Promise<TrunkRecord[]>;
  /** Replace a trunk of `t.authId`; false when there is none. */
  updateTrunk(t: TrunkRecord): Promise<boolean>;
  /** Delete a trunk of the account and every child of it (usernames freed); false when there is none. */
  deleteTrunk(authId: string, trunkId: string): Promise<boolean>;
  /**
   * Create or replace a child. 'no_trunk' when `rec.trunkId` is no trunk of `rec.authId`;
   * 'username_taken' when another credential (of any account) has the username
   * (compared case-insensitively). A replaced child keeps its place in the lists.
   */
  putChild<K extends ChildKind>(kind: K, rec: ChildRecords[K]): Promise<PutChildResult>;
  /** A child by id (any account), or null. */
  getChild<K extends ChildKind>(kind: K, id: string): Promise<ChildRecords[K] | null>;
  /** An account's children of one kind, oldest first. */
  listChildren<K extends ChildKind>(kind: K, authId: string): Promise<Array<ChildRecords[K]>>;
  /** A trunk's children of one kind, oldest first. */
  childrenOf<K extends ChildKind>(kind: K, trunkId: string): Promise<Array<ChildRecords[K]>>;
  /** Delete a child of the account; false when there is none. */
  deleteChild(kind: ChildKind, authId: string, id: string): Promise<boolean>;
  /** The credential with this username (case-insensitive), or null. */
  credentialByUsername(username: string): Promise<TrunkCredentialRecord | null>;
  /** Every IP ACL entry of the platform with its trunk (the inbound index is built from it). */
  allAcls(): Promise<Array<{ acl: IpAclRecord; trunk: TrunkRecord }>>;
  close(): Promise<void>;
}
