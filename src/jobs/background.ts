import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import type { Db } from '../db/connect.ts';
import type { Providers } from '../providers/provider.ts';
import { buildVoterImports } from '../modules/voter-imports/import-jobs.ts';
import { DeliveryWorker } from '../modules/sending/delivery-worker.ts';
import { VoterImportLoop } from '../modules/voter-imports/import-jobs.loop.ts';
import { VoterTagging } from '../modules/voters/voter-tags.ts';
import { PollLoop } from '../lib/poll-loop.ts';
import { SurveyRuns } from '../modules/surveys/survey-runs.ts';
import { compactVoterValueCounts } from '../modules/voters/voter-value-counts.ts';
import { isPostgres } from '../db/dialect.ts';
import { PRIVACY_CHORE_MS, privacyRound } from '../modules/privacy/privacy-chores.ts';
import { startWebhookDelivery, type WebhookDeliveryWorker } from './webhook-delivery.ts';

/**
 * Every background loop of a process, in one place for server.ts (in-process workers) and worker.ts (the
 * worker process): message delivery and its chores, webhook delivery, voter import jobs, bulk tagging jobs, survey runs, the privacy
 * chore (retention, requests falling due) and (PostgreSQL) the folding of voter value counts. A new loop is added here only.
 */
export class Background {
  readonly delivery: DeliveryWorker;
  private webhooks: WebhookDeliveryWorker | undefined;
  readonly imports: VoterImportLoop;
  readonly tags: PollLoop;
  readonly surveys: PollLoop;
  /** Retention and the due-soon announcements of data-principal requests (privacy-chores.ts). */
  readonly privacy: PollLoop;
  /** PostgreSQL only: folds voter_value_counts' deltas (voter-value-counts.ts). */
  readonly valueCounts: PollLoop | undefined;

  /** Shares channel accounts' send rates between processes (REDIS_URL). */
  private readonly redis: Redis | undefined;

  constructor(
    private readonly deps: { db: Db; config: Readonly<Config>; providers: Providers; log: FastifyBaseLogger },
  ) {
    const { redisUrl, redisTimeoutMs } = deps.config;
    this.redis = redisUrl
      ? new Redis(redisUrl, {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          commandTimeout: redisTimeoutMs,
          connectTimeout: Math.max(1000, redisTimeoutMs),
        })
      : undefined;
    this.redis?.on('error', (error) => deps.log.debug({ err: error }, 'redis error'));
    this.delivery = new DeliveryWorker({ ...deps, redis: this.redis });
    const { db, config, log } = deps;
    const { jobs } = buildVoterImports(deps);
    this.imports = new VoterImportLoop({
      db,
      jobs,
      log,
      retentionDays: config.import.jobRetentionDays,
    });
    const tagging = new VoterTagging({ db: db.kysely });
    this.tags = new PollLoop({
      name: 'voter tagging',
      round: async (stopping) => (await tagging.runPending({ stopping })) > 0,
      log,
      pollMs: 1000,
    });
    tagging.onQueued(() => this.tags.wake());
    const runs = new SurveyRuns({ db: db.kysely, sessionHours: config.surveySessionHours });
    this.surveys = new PollLoop({
      name: 'survey',
      round: (stopping) => runs.round(stopping),
      log,
      pollMs: 500,
    });
    this.privacy = new PollLoop({
      name: 'privacy',
      round: () => privacyRound(db.kysely),
      log,
      pollMs: PRIVACY_CHORE_MS,
    });
    this.valueCounts = isPostgres(db.kysely)
      ? new PollLoop({
          name: 'voter value counts',
          round: () => compactVoterValueCounts(db.kysely),
          log,
          pollMs: 10_000,
        })
      : undefined;
  }

  start(): void {
    const { db, config, log } = this.deps;
    this.webhooks ??= startWebhookDelivery({ db: db.kysely, config, log });
    this.delivery.start();
    this.imports.start();
    this.tags.start();
    this.surveys.start();
    this.privacy.start();
    this.valueCounts?.start();
  }

  /** Stops every loop; each hands back (releases) the work it has claimed but not done. */
  async stop(): Promise<void> {
    await Promise.all([
      this.webhooks?.stop(),
      this.delivery.stop(),
      this.imports.stop(),
      this.tags.stop(),
      this.surveys.stop(),
      this.privacy.stop(),
      this.valueCounts?.stop(),
    ]);
    this.redis?.disconnect();
  }
}
