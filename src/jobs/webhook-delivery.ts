import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Database } from '../db/schema.ts';
import { PollLoop } from '../lib/poll-loop.ts';
import { eventMessageId } from '../modules/webhooks/webhooks.events.ts';
import {
  type ClaimedDelivery,
  claimEndpointDeliveries,
  dueEndpoints,
  loadClaimed,
  recordAttempt,
  releaseClaims,
  recordEndpointHealth,
  updateWebhook,
} from '../modules/webhooks/webhooks.repository.ts';
import { webhookSecretBox } from '../modules/webhooks/webhooks.secrets.ts';
import { type AttemptOutcome, eventBody, sendSigned } from '../modules/webhooks/webhooks.sender.ts';
import { type Resolver, systemResolver } from '../modules/webhooks/webhooks.ssrf.ts';

export interface WebhookWorkerDeps {
  db: Kysely<Database>;
  config: Pick<Config, 'appKey' | 'webhooks'>;
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>;
  /** DNS for the connect-time SSRF check; tests inject their own. */
  resolver?: Resolver;
  /** Names this worker's claims; unique per process by default. */
  workerId?: string;
  /** Serve only these workspaces' deliveries (a dedicated worker; tests sharing one database). Default: all. */
  workspaceIds?: readonly number[];
}

/**
 * The webhook delivery loop. Each delivery is an attempt of its own (signed, SSRF-guarded, limited to
 * WEBHOOK_TIMEOUT_SECONDS), started as soon as it is due and there is room for it: at most
 * WEBHOOK_MAX_IN_FLIGHT attempts in this process, WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT to one endpoint and
 * WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE to one workspace's endpoints (those two counted across every worker,
 * from the live leases). The loop never waits for an attempt: an endpoint that hangs holds only its own
 * slots, while every other endpoint's deliveries and retries go out on time.
 *
 * Outcomes: `succeeded` on a 2xx; on anything else another attempt after the next delay of
 * WEBHOOK_RETRY_SCHEDULE, or `failed` once the schedule is spent; a 410 disables the endpoint. A worker that
 * dies mid-attempt leaves a lease that runs out, and any worker claims the delivery again. On PostgreSQL any
 * number of workers (processes) share the table; on SQLite run one, in-process.
 */
export class WebhookDeliveryWorker {
  readonly workerId: string;
  private readonly resolver: Resolver;
  private readonly secrets;
  private readonly poll: PollLoop;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly deps: WebhookWorkerDeps) {
    this.workerId = deps.workerId ?? `webhooks:${randomUUID()}`;
    this.resolver = deps.resolver ?? systemResolver;
    this.secrets = webhookSecretBox(deps.config.appKey);
    // Until the poll interval passes or an attempt ends (its slot is free again: it wakes the loop).
    this.poll = new PollLoop({
      name: 'webhook delivery',
      round: async () => (await this.fill()).more,
      log: deps.log,
      pollMs: deps.config.webhooks.pollIntervalMs,
    });
  }

  /** How long a claim holds: well past one attempt's time limit. */
  private get leaseMs(): number {
    return Math.max(60_000, this.deps.config.webhooks.timeoutMs * 3);
  }

  /** stop() was called on a running loop: claim nothing more. */
  private get stopping(): boolean {
    return this.poll.stopping;
  }

  start(): void {
    this.poll.start();
  }

  /** Stops claiming, waits for the attempts in flight, and gives back anything still claimed. */
  async stop(): Promise<void> {
    await this.poll.stop();
    await Promise.all(this.inFlight);
    // Claims not released now run out with their leases, and another worker takes them then.
    await releaseClaims(this.deps.db, this.workerId).catch((error: unknown) =>
      this.deps.log.warn(
        { err: error },
        'webhook deliveries not released at stop: their leases will run out',
      ),
    );
  }

  /**
   * Claims what is due and has room, and starts each attempt without waiting for it. `more` is true when
   * the pass stopped at WEBHOOK_BATCH_SIZE with room left (the loop goes again at once).
   */
  private async fill(): Promise<{ started: Promise<void>[]; more: boolean }> {
    const { db, config } = this.deps;
    const { maxInFlight, maxInFlightPerEndpoint, maxInFlightPerWorkspace, batchSize } = config.webhooks;
    // With every slot held (other workspaces' receivers hanging), a workspace with nothing in flight still gets
    // one: slots beyond WEBHOOK_MAX_IN_FLIGHT go one per such workspace, so nobody waits on another's timeouts.
    const full = this.inFlight.size >= maxInFlight;
    const room = full ? batchSize : Math.min(maxInFlight - this.inFlight.size, batchSize);
    const started: Promise<void>[] = [];
    const now = new Date();
    const at = now.toISOString();
    const leaseUntil = new Date(now.getTime() + this.leaseMs).toISOString();
    const endpoints = await dueEndpoints(
      db,
      at,
      { perEndpoint: maxInFlightPerEndpoint, perWorkspace: maxInFlightPerWorkspace },
      room * 2,
      this.deps.workspaceIds,
    );
    const taken = new Map<number, number>();
    let left = room;
    for (const endpoint of endpoints) {
      if (left <= 0 || this.stopping) break;
      const workspaceHeld = endpoint.workspace_held + (taken.get(endpoint.workspace_id) ?? 0);
      if (full && workspaceHeld > 0) continue;
      const wanted = Math.min(
        full ? 1 : Infinity,
        endpoint.due,
        maxInFlightPerEndpoint - endpoint.held,
        maxInFlightPerWorkspace - workspaceHeld,
        left,
      );
      if (wanted <= 0) continue;
      const ids = await claimEndpointDeliveries(
        db,
        this.workerId,
        endpoint.workspace_id,
        endpoint.webhook_id,
        at,
        leaseUntil,
        wanted,
      );
      if (ids.length === 0) continue;
      taken.set(endpoint.workspace_id, (taken.get(endpoint.workspace_id) ?? 0) + ids.length);
      left -= ids.length;
      for (const delivery of await loadClaimed(db, this.workerId, ids)) started.push(this.track(delivery));
    }
    return { started, more: !full && left === 0 && this.inFlight.size < maxInFlight };
  }

  /** Starts one attempt in the background; its end frees its slot and wakes the loop. */
  private track(delivery: ClaimedDelivery): Promise<void> {
    const task = this.attempt(delivery)
      .catch((error: unknown) => {
        // The outcome could not be recorded: the lease runs out and the delivery is attempted again.
        this.deps.log.error({ err: error, delivery_id: delivery.id }, 'webhook delivery attempt failed');
      })
      .finally(() => {
        this.inFlight.delete(task);
        this.poll.wake();
      });
    this.inFlight.add(task);
    return task;
  }

  /** One pass: claims what is due and has room, and waits for those attempts. Returns how many (tests). */
  async runOnce(): Promise<number> {
    const { started } = await this.fill();
    await Promise.all(started);
    return started.length;
  }

  /** Runs passes until nothing is due (tests; a zero retry schedule makes every retry due at once). */
  async drain(maxRounds = 100): Promise<void> {
    for (let round = 0; round < maxRounds; round += 1) {
      if ((await this.runOnce()) === 0) return;
    }
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const { db, config, log } = this.deps;
    const outcome = await this.send(delivery);
    const finished = new Date();
    const attempts = delivery.attempts + 1;
    const schedule = config.webhooks.retrySchedule;
    const retryIn =
      !outcome.ok && !outcome.gone && attempts <= schedule.length ? schedule[attempts - 1] : undefined;
    const status = outcome.ok ? 'succeeded' : retryIn !== undefined ? 'pending' : 'failed';
    const at = finished.toISOString();
    await db.transaction().execute(async (trx) => {
      const recorded = await recordAttempt(trx, delivery.workspace_id, delivery.id, this.workerId, {
        status,
        attempts,
        next_attempt_at:
          retryIn !== undefined ? new Date(finished.getTime() + retryIn * 1000).toISOString() : at,
        last_attempt_at: at,
        last_status_code: outcome.statusCode,
        last_error: outcome.error,
        updated_at: at,
      });
      if (recorded) {
        const health = await recordEndpointHealth(
          trx,
          delivery.webhook_id,
          outcome.timedOut === true,
          finished,
        );
        if (health.pausedUntil) {
          log.warn(
            { webhook_id: delivery.webhook_id, paused_until: health.pausedUntil },
            'webhook endpoint paused: it keeps timing out',
          );
        }
      }
      if (recorded && outcome.gone) {
        await updateWebhook(trx, delivery.workspace_id, delivery.webhook_id, {
          disabled_at: at,
          disabled_reason: 'the endpoint answered 410 Gone',
          updated_at: at,
        });
      }
    });
    log.info(
      {
        delivery_id: delivery.id,
        webhook_id: delivery.webhook_id,
        status,
        attempts,
        status_code: outcome.statusCode,
      },
      'webhook delivery attempt',
    );
  }

  /** One signed POST of the delivery's event; any failure (the secret unreadable included) is an outcome. */
  private async send(delivery: ClaimedDelivery): Promise<AttemptOutcome> {
    const { config } = this.deps;
    // Sealed under another APP_KEY (or altered): nothing can be signed; the schedule runs out as usual.
    const secret = this.secrets.openOr(delivery.secret_encrypted);
    try {
      if (secret === undefined)
        throw new Error('the signing secret cannot be decrypted: was APP_KEY changed?');
      return await sendSigned(
        {
          url: delivery.url,
          secret,
          messageId: eventMessageId(delivery.event_id),
          body: eventBody(delivery.event_type, delivery.event_created_at, delivery.payload),
          timestamp: new Date(),
        },
        {
          resolver: this.resolver,
          allowPrivate: config.webhooks.allowPrivateUrls,
          timeoutMs: config.webhooks.timeoutMs,
        },
      );
    } catch (error) {
      return {
        ok: false,
        statusCode: null,
        error: error instanceof Error ? error.message.slice(0, 500) : 'delivery error',
        gone: false,
      };
    }
  }
}

/** Starts the delivery loop; `await worker.stop()` on shutdown. One call for server.ts or worker.ts. */
export function startWebhookDelivery(deps: WebhookWorkerDeps): WebhookDeliveryWorker {
  const worker = new WebhookDeliveryWorker(deps);
  worker.start();
  return worker;
}
