import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Account, buildTestApp, call, dialects, register, type TestApp } from './helpers.ts';
import { type Receiver, startReceiver, until, workerFor } from './webhook-receivers.ts';

/**
 * One endpoint that never answers must delay only itself: the other workspaces' deliveries go out at once
 * and their retries keep to the schedule, while the hanging endpoint holds no more than its own slots.
 */
const env = {
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  WEBHOOK_TIMEOUT_SECONDS: '30',
  WEBHOOK_RETRY_SCHEDULE: '1,1',
  WEBHOOK_POLL_INTERVAL_MS: '50',
  WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: '2',
  WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '3',
};

/** Accepts requests and never answers them (until closed). */
async function hangingReceiver() {
  const held: ServerResponse[] = [];
  const server: Server = createServer((_req, res) => held.push(res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    held,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function createHook(t: TestApp, owner: Account, url: string) {
  const res = await call(t.app, 'POST', '/api/webhooks', {
    token: owner.token,
    body: { url, events: ['grievance.created'] },
  });
  if (res.status !== 201) throw new Error(`create webhook: ${res.status} ${res.raw}`);
  return res.body.data as { id: number };
}

async function grievance(t: TestApp, owner: Account, title: string) {
  const res = await call(t.app, 'POST', '/api/grievances', { token: owner.token, body: { title } });
  if (res.status !== 201) throw new Error(`create grievance: ${res.status} ${res.raw}`);
}

for (const dialect of dialects) {
  describe(`webhook delivery isolation (${dialect})`, () => {
    let t: TestApp;
    const closers: Array<() => Promise<void>> = [];
    beforeAll(async () => {
      t = await buildTestApp(dialect, env);
    });
    afterAll(async () => {
      for (const close of closers) await close();
      await t.close();
    });

    it('a hanging endpoint delays neither another workspace’s deliveries nor another endpoint’s retries', async () => {
      const [slow, failing, healthy] = [await register(t.app), await register(t.app), await register(t.app)];
      const hang = await hangingReceiver();
      closers.push(hang.close);
      const times: number[] = [];
      const refusing = await startReceiver(() => {
        times.push(Date.now());
        return 500;
      });
      const ok: Receiver = await startReceiver();
      closers.push(refusing.close, ok.close);
      await createHook(t, slow, hang.url);
      await createHook(t, slow, `${hang.url}/second`);
      await createHook(t, failing, refusing.url);
      await createHook(t, healthy, ok.url);

      const worker = workerFor(
        t,
        [slow, failing, healthy].map((a) => a.user.workspace_id),
      );
      worker.start();
      try {
        // Six deliveries to each of the slow workspace's two hanging endpoints.
        for (let i = 0; i < 6; i += 1) await grievance(t, slow, `Slow ${i}`);
        // Two per endpoint, three for the workspace, then they hold: nothing else is sent to them.
        await until(() => hang.held.length === 3);
        await new Promise((r) => setTimeout(r, 300));
        expect(hang.held).toHaveLength(3);

        const started = Date.now();
        await grievance(t, healthy, 'Water supply cut');
        await grievance(t, failing, 'Street light broken');
        await until(() => ok.received.length === 1, 5_000);
        const healthyWait = Date.now() - started;
        // The first attempt and both retries, 1 s apart, while the hanging attempts are still open.
        await until(() => times.length === 3, 6_000);
        expect(healthyWait).toBeLessThan(3_000);
        expect(times[0]! - started).toBeLessThan(3_000);
        for (const gap of [times[1]! - times[0]!, times[2]! - times[1]!]) {
          expect(gap).toBeGreaterThanOrEqual(900);
          expect(gap).toBeLessThan(2_500);
        }
        expect(hang.held).toHaveLength(3);
      } finally {
        // The hanging attempts end (connection reset) and the worker stops.
        await hang.close();
        await worker.stop();
      }
    });

    it('endpoints that never answer in other workspaces cannot starve a workspace of the global slots; the breaker pauses them', async () => {
      // The attack, scaled down: WEBHOOK_MAX_IN_FLIGHT 4, two workspaces of two hanging endpoints each
      // fill it, five events each; before, the third workspace's delivery waited for their whole backlog.
      const capped = await buildTestApp(dialect, {
        ...env,
        WEBHOOK_MAX_IN_FLIGHT: '4',
        WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '2',
        WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: '1',
        WEBHOOK_TIMEOUT_SECONDS: '1',
        WEBHOOK_RETRY_SCHEDULE: '0,0,0,0',
      });
      const hang = await hangingReceiver();
      const ok: Receiver = await startReceiver();
      const attackers = [await register(capped.app), await register(capped.app)];
      const victim = await register(capped.app);
      const worker = workerFor(
        capped,
        [...attackers, victim].map((a) => a.user.workspace_id),
      );
      try {
        const hooks: Array<{ id: number }> = [];
        for (const [i, attacker] of attackers.entries()) {
          for (const j of [0, 1]) hooks.push(await createHook(capped, attacker, `${hang.url}/${i}/${j}`));
          for (let k = 0; k < 5; k += 1) await grievance(capped, attacker, `Flood ${k}`);
        }
        await createHook(capped, victim, ok.url);
        worker.start();
        await until(() => hang.held.length === 4);
        // Every slot is held by a hanging attempt; the victim's event comes after the attackers' backlog.
        const started = Date.now();
        await grievance(capped, victim, 'Water supply cut');
        await until(() => ok.received.length === 1, 10_000);
        // A slot frees within WEBHOOK_TIMEOUT_SECONDS, and the workspace with nothing in flight gets it first.
        expect(Date.now() - started).toBeLessThan(3_000);
        // After three timeouts in a row each hanging endpoint is paused, and says so.
        await until(async () => {
          const list = await call(capped.app, 'GET', '/api/webhooks', { token: attackers[0]!.token });
          return list.body.data.data.every((h: { paused_until: string | null }) => h.paused_until !== null);
        }, 15_000);
        const paused = await call(capped.app, 'GET', '/api/webhooks', { token: attackers[0]!.token });
        for (const h of paused.body.data.data) expect(Date.parse(h.paused_until)).toBeGreaterThan(Date.now());
        // PATCH active=true lifts the pause.
        const lifted = await call(capped.app, 'PATCH', `/api/webhooks/${hooks[0]!.id}`, {
          token: attackers[0]!.token,
          body: { active: true },
        });
        expect(lifted.body.data.paused_until).toBeNull();
      } finally {
        await hang.close();
        await ok.close();
        await worker.stop();
        await capped.close();
      }
    }, 40_000);

    it('WEBHOOK_MAX_IN_FLIGHT bounds the attempts open in one worker, plus one for each workspace that had none in flight', async () => {
      const capped = await buildTestApp(dialect, { ...env, WEBHOOK_MAX_IN_FLIGHT: '2' });
      const hang = await hangingReceiver();
      const owners = [await register(capped.app), await register(capped.app), await register(capped.app)];
      const worker = workerFor(
        capped,
        owners.map((a) => a.user.workspace_id),
      );
      try {
        // Two endpoints each: six deliveries due, two of them for every workspace.
        for (const [i, owner] of owners.entries()) {
          await createHook(capped, owner, `${hang.url}/${i}/a`);
          await createHook(capped, owner, `${hang.url}/${i}/b`);
          await grievance(capped, owner, `Grievance ${i}`);
        }
        worker.start();
        await until(() => hang.held.length === 4);
        await new Promise((r) => setTimeout(r, 300));
        // Two slots, then one each for the two workspaces left with nothing in flight; no more.
        expect(hang.held).toHaveLength(4);
      } finally {
        await hang.close();
        await worker.stop();
        await capped.close();
      }
    });

    it("a workspace with nothing in flight gets a slot within 1 s while five workspaces' hanging receivers hold them all", async () => {
      const capped = await buildTestApp(dialect, {
        ...env,
        WEBHOOK_MAX_IN_FLIGHT: '5',
        WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '1',
        WEBHOOK_TIMEOUT_SECONDS: '30',
      });
      const hang = await hangingReceiver();
      const ok: Receiver = await startReceiver();
      const attackers = await Promise.all(Array.from({ length: 5 }, () => register(capped.app)));
      const victim = await register(capped.app);
      const worker = workerFor(
        capped,
        [...attackers, victim].map((a) => a.user.workspace_id),
      );
      try {
        for (const [i, attacker] of attackers.entries()) {
          await createHook(capped, attacker, `${hang.url}/${i}`);
          for (let k = 0; k < 3; k += 1) await grievance(capped, attacker, `Flood ${k}`);
        }
        await createHook(capped, victim, ok.url);
        worker.start();
        await until(() => hang.held.length === 5);
        const started = Date.now();
        await grievance(capped, victim, 'Water supply cut');
        await until(() => ok.received.length === 1, 10_000);
        // The hanging attempts time out only after 30 s: this slot is the idle workspace's own.
        expect(Date.now() - started).toBeLessThan(1500);
        expect(hang.held).toHaveLength(5);
      } finally {
        await hang.close();
        await ok.close();
        await worker.stop();
        await capped.close();
      }
    });
  });
}
