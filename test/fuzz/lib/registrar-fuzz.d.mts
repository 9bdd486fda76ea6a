/** An endpoint's digest credentials. */
export interface FuzzEndpoint {
  user: string;
  domain: string;
  password: string;
}

/**
 * A reproducible source of REGISTERs for `who` that pass digest authentication
 * (MD5, qop=auth, with the given nonce) while every other header is hostile.
 */
export function registrarMessages(seed: number, who: FuzzEndpoint): (nonce: string, transport: string) => Buffer;

/** Provision one account and endpoint through the HTTP API with the partner's credentials. */
export function provisionEndpoint(httpPort: number, partner: { readonly id: string; readonly token: string }): Promise<FuzzEndpoint>;

/**
 * A fresh MD5 nonce for `who`: `sendAndWait` sends a REGISTER without
 * credentials and resolves to the response text carrying that Call-ID.
 */
export function fetchNonce(sendAndWait: (message: Buffer, callId: string) => Promise<string>, who: FuzzEndpoint): Promise<string>;
