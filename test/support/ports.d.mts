/** A loopback port free for both TCP and UDP a moment ago. */
export function freePort(): Promise<number>;
/** Whether a loopback UDP port could be bound a moment ago. */
export function udpFree(port: number): Promise<boolean>;
