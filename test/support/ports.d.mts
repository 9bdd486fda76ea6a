/** A loopback port free for both TCP and UDP a moment ago. */
export function freePort(): Promise<number>;
