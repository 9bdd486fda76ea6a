/**
 * Digest credentials of endpoints, looked up by account SIP domain + username.
 * Only HA1 values are kept (RFC 7616 §3.4.2): HA1 = H(username ":" realm ":" password),
 * realm = the account's SIP domain. The plaintext password is never stored.
 *
 * The HTTP API (endpoint create/update/delete) writes here; the registrar reads.
 */
export interface EndpointCredential {
  endpointId: string;
  /** hex MD5(username:realm:password) */
  ha1Md5: string;
  /** hex SHA-256(username:realm:password) */
  ha1Sha256: string;
  /**
   * The endpoint's account or sub-account is disabled: the password still
   * verifies, but the registrar answers 403 and writes no binding (README
   * "Disabled accounts"). Kept here so an honest REGISTER still costs one read.
   */
  disabled?: boolean;
}

export interface CredentialStore {
  /** The credential of `user` in account domain `domain`, or null (unknown or retired). */
  get(domain: string, user: string): Promise<EndpointCredential | null>;
  put(domain: string, user: string, cred: EndpointCredential): Promise<void>;
  delete(domain: string, user: string): Promise<void>;
  close(): Promise<void>;
}
