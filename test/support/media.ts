/**
 * Checks against a real rtpengine (test/support/rtpengine.mjs) for the media tests.
 */
import { RtpengineRejectedError, type RtpengineClient } from '../../src/media/rtpengine.js';
import { until } from './wait.js';

/** Resolves once rtpengine answers `query` for `callId` with an error: it holds no session for the call. */
export function sessionGone(probe: RtpengineClient, engine: string, callId: string, timeoutMs = 5000): Promise<true> {
  return until(
    `rtpengine forgets ${callId}`,
    async () => {
      try {
        await probe.query({ 'call-id': callId }, engine);
        return undefined;
      } catch (err) {
        return err instanceof RtpengineRejectedError ? true : undefined;
      }
    },
    timeoutMs,
  );
}
