/**
 * GRUU (RFC 5627) with a real client: SIP.js 0.21 sends `Supported: gruu` on every
 * REGISTER, `+sip.instance` when its Registerer has an instanceId and regId, and keeps
 * the GRUUs it is given. Two SIP.js phones register the same
 * endpoint over WS; a UDP phone of another endpoint sends MESSAGEs and an INVITE
 * to one device's GRUUs, and each phone records every request it gets, so the
 * test sees on the wire that the other device got nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPhoneProcess, type PhoneProcess } from '../support/phone-process.js';
import { sleep, startEdge, TestUa, type Edge, type Endpoint } from '../support/proxy-harness.js';
import { until } from '../support/wait.js';


describe('GRUU (RFC 5627) with SIP.js phones', () => {
  let edge: Edge;
  const phones: PhoneProcess[] = [];
  let caller: TestUa;

  beforeAll(async () => {
    edge = await startEdge();
  });
  afterAll(async () => {
    for (const p of phones) p.child.kill('SIGKILL');
    caller?.close();
    await edge?.stop();
  });

  const gruusOf = (p: PhoneProcess) =>
    until('GRUUs', () => {
      const g = p.events.find((e) => e.event === 'gruu');
      return g ? { pub: String(g.pub), temp: String(g.temp) } : undefined;
    });
  const got = (p: PhoneProcess, kind: 'message' | 'invite') => p.events.filter((e) => e.event === kind);

  it('gives pub-gruu and temp-gruu; each reaches only its device; a temp-gruu dies with its registration', async () => {
    const a = await edge.newAccount();
    const alice: Endpoint = await edge.newEndpoint(a, 'alice');
    const bob = await edge.newEndpoint(a, 'bob');
    const server = `ws://127.0.0.1:${edge.server.ports.ws}`;
    const desk = startPhoneProcess(server, alice, { gruu: true });
    const laptop = startPhoneProcess(server, alice, { gruu: true });
    phones.push(desk, laptop);
    const [dg, lg] = await Promise.all([gruusOf(desk), gruusOf(laptop)]);
    await edge.waitBindings(alice, 2);

    // Public GRUU: the AOR with gr=<instance URN>; temporary: opaque, in the account's domain.
    for (const g of [dg, lg]) {
      expect(g.pub).toMatch(new RegExp(`^sip:alice@${a.sipDomain.replace(/\./g, '\\.')};gr=urn:uuid:[0-9a-f-]{36}$`));
      expect(g.temp).toMatch(new RegExp(`^sip:tgruu\\.[A-Za-z0-9_-]+@${a.sipDomain.replace(/\./g, '\\.')};gr$`));
      expect(g.temp).not.toContain('alice');
    }
    expect(dg.pub).not.toBe(lg.pub);

    caller = await TestUa.start(edge.server.ports.udp as number, bob);
    expect(await caller.register()).toBe(200);

    // A MESSAGE to the AOR forks to both devices.
    expect((await caller.call('MESSAGE', `sip:alice@${a.sipDomain}`)).status).toBe(200);
    await until('both devices got the AOR message', () => (got(desk, 'message').length === 1 && got(laptop, 'message').length === 1 ? true : undefined));

    // To the desk's public GRUU: the desk only.
    expect((await caller.call('MESSAGE', dg.pub)).status).toBe(200);
    // To the laptop's temporary GRUU: the laptop only.
    expect((await caller.call('MESSAGE', lg.temp)).status).toBe(200);
    // A call to the desk's public GRUU rings the desk only (declined there with 486: no media in Node).
    expect((await caller.call('INVITE', dg.pub)).status).toBe(486);
    await sleep(300);
    expect(got(desk, 'message').length).toBe(2);
    expect(got(laptop, 'message').length).toBe(2);
    expect(got(desk, 'invite').length).toBe(1);
    expect(got(laptop, 'invite').length).toBe(0);

    // A temporary GRUU that does not open (tampered) names nothing.
    const tampered = lg.temp.replace(/tgruu\.(.{10})(.)/, (_m, head: string, c: string) => `tgruu.${head}${c === 'A' ? 'B' : 'A'}`);
    expect((await caller.call('MESSAGE', tampered)).status).toBe(404);

    // The laptop unregisters (SIP.js unregisters on stop): its temporary and public GRUUs reach nobody.
    laptop.child.kill('SIGTERM');
    await edge.waitBindingsAtMost(alice, 1);
    expect((await caller.call('MESSAGE', lg.temp)).status).toBe(480);
    expect((await caller.call('MESSAGE', lg.pub)).status).toBe(480);
    expect(got(desk, 'message').length).toBe(2);
    // The desk's GRUUs still work.
    expect((await caller.call('MESSAGE', dg.temp)).status).toBe(200);
    await until('desk got its temp-gruu message', () => (got(desk, 'message').length === 3 ? true : undefined));
  }, 60_000);
});
