import { describe, expect, it } from 'vitest';
import { AppError } from '../src/errors.ts';
import { FairGate } from '../src/lib/fair-gate.ts';

describe('FairGate: a shared resource shared per workspace', () => {
  it('holds each workspace to its share and the whole to the capacity', async () => {
    const gate = new FairGate(4, 1, 1000, 'Slots');
    const a = await gate.acquire(1);
    await gate.acquire(2);
    expect(gate.inUse()).toBe(2);
    // Workspace 1 is at its share: its second request waits although two slots are free.
    let second = false;
    const waiting = gate.acquire(1).then((release) => ((second = true), release));
    await gate.acquire(3);
    expect(second).toBe(false);
    a();
    const release = await waiting;
    expect(second).toBe(true);
    expect(gate.inUse(1)).toBe(1);
    release();
    expect(gate.inUse(1)).toBe(0);
  });

  it('serves waiting workspaces in turn, not in arrival order', async () => {
    const gate = new FairGate(1, 1, 1000, 'Slots');
    const first = await gate.acquire(1);
    const order: string[] = [];
    const wait = (key: number, name: string) =>
      gate.acquire(key).then((release) => {
        order.push(name);
        release();
      });
    // Workspace 1 queues three requests before workspace 2 queues one: 2 is served second, not fourth.
    const all = [wait(1, 'a1'), wait(1, 'a2'), wait(1, 'a3'), wait(2, 'b1')];
    first();
    await Promise.all(all);
    expect(order).toEqual(['a1', 'b1', 'a2', 'a3']);
  });

  it('refuses a request not served in time with 503 and Retry-After, and forgets it', async () => {
    const gate = new FairGate(1, 1, 50, 'Slots');
    const held = await gate.acquire(1);
    const refused = await gate.acquire(2).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe('service_unavailable');
    expect((refused as AppError).headers?.['retry-after']).toBe('10');
    held();
    expect(gate.inUse()).toBe(0);
    const next = await gate.acquire(2);
    expect(gate.inUse(2)).toBe(1);
    next();
    next(); // a second call gives nothing back twice
    expect(gate.inUse()).toBe(0);
  });
});
