import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, SurveyRunRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import type { MessageChannel } from '../../domain.ts';
import { ChunkPacer } from '../../lib/pacing.ts';
import { addressColumn } from '../campaigns/campaigns.repository.ts';
import { refundCredits } from '../credits/credits.repository.ts';
import { creditChannel } from '../messages/messages.rules.ts';
import { optedOutAddresses } from '../opt-outs/opt-outs.repository.ts';
import { filteredVoters, type VoterFilters, withPlaces } from '../voters/voters.search.ts';
import { expireIdle, startSession } from './survey-sessions.ts';
import {
  endRunsDue,
  markRunFilled,
  moveRunCursor,
  runsFillingDue,
  spendRunReservation,
  startRunsDue,
  surveyOf,
  updateRun,
} from './surveys.repository.ts';
import { votersByAddress } from '../voters/voters.repository.ts';
import { defaultLanguage } from '../workspaces/workspaces.repository.ts';
import { runRef } from '../../refs.ts';

/**
 * The survey loop of a worker: starts scheduled runs that are due, opens a running run's sessions in id-ordered
 * chunks of its audience (each chunk one transaction that ends by moving the run's cursor from where it found
 * it, so a second process applies no chunk twice), completes runs with no open session left, and ends sessions
 * idle past SURVEY_SESSION_HOURS.
 */

class ChunkTaken extends Error {}

const EXPIRE_EVERY_MS = 60_000;
/** Recipients of a list opened in one transaction. */
const RECIPIENTS_CHUNK = 500;

export class SurveyRuns {
  private expiredAt = 0;
  /** Each filling run's chunk size, learnt from its chunks' times. */
  private readonly pacers = new Map<number, ChunkPacer>();

  constructor(private readonly deps: { db: Kysely<Database>; sessionHours: number; clock?: () => Date }) {}

  /** One round of every duty; true when any found work. */
  async round(stopping: () => boolean = () => false): Promise<boolean> {
    const { db } = this.deps;
    const now = this.deps.clock?.() ?? new Date();
    let busy = await startRunsDue(db, now.toISOString());
    // One chunk of each workspace's oldest filling run per round: a workspace that starts many large runs
    // takes its turn beside the others, never ahead of them.
    const filling = await runsFillingDue(db);
    const seen = new Set<number>();
    for (const run of filling) {
      if (stopping()) break;
      if (seen.has(run.workspace_id)) continue;
      seen.add(run.workspace_id);
      if (await this.fillChunk(run)) busy = true;
    }
    // A run whose every session the provider refused ends `failed`, not `completed` (its last_error says why).
    if (await endRunsDue(db, now.toISOString())) busy = true;
    if (Date.now() - this.expiredAt >= EXPIRE_EVERY_MS || this.deps.clock) {
      this.expiredAt = Date.now();
      // In batches of 1,000 until none is left (a run's hundred thousand sessions end the same minute).
      for (let i = 0; i < 100 && !stopping(); i++) {
        const ended = await expireIdle(db, this.deps.sessionHours, now);
        if (ended > 0) busy = true;
        if (ended < 1000) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    return busy;
  }

  /**
   * Opens the sessions of the next chunk of a run's audience (a list of recipients is one chunk; a filter's voters
   * go in id ranges sized by time), and finishes the run's fill after its last; true when it did any.
   */
  private async fillChunk(run: SurveyRunRow): Promise<boolean> {
    const channel = run.channel as MessageChannel;
    if (run.recipients !== null) {
      // A list of recipients (up to 10,000) in slices of RECIPIENTS_CHUNK, the cursor counting those done: one
      // long transaction would hold SQLite's writer from every other workspace.
      const all = JSON.parse(run.recipients) as string[];
      const upTo = Math.min(run.after_id + RECIPIENTS_CHUNK, all.length);
      const recipients = all.slice(run.after_id, upTo);
      await this.chunk(run, run.after_id, upTo, async (trx) => {
        const column = addressColumn(channel) === 'voters.email' ? 'email' : 'phone';
        const byAddress = await votersByAddress(trx, run.workspace_id, column, recipients);
        return recipients.map((address) => ({ address, voter: byAddress.get(address) }));
      });
      if (upTo >= all.length) await this.finish(run);
      return true;
    }
    const limit = run.voter_id_limit ?? 0;
    if (run.after_id >= limit) {
      await this.finish(run);
      return true;
    }
    const filters = await withPlaces(
      this.deps.db,
      run.workspace_id,
      JSON.parse(run.filters ?? '{}') as VoterFilters,
    );
    const pacer = this.pacers.get(run.id) ?? new ChunkPacer(2_000, 200, 20_000);
    this.pacers.set(run.id, pacer);
    const from = run.after_id;
    const upTo = Math.min(from + pacer.size, limit);
    const started = performance.now();
    const ok = await this.chunk(run, from, upTo, async (trx) => {
      const column = addressColumn(channel);
      const rows = await filteredVoters(trx, run.workspace_id, filters, { after: from, upTo })
        .where(column, 'is not', null)
        .select(['voters.id', `${column} as address`, 'voters.language'])
        .orderBy('voters.id')
        .execute();
      return rows.map((r) => ({ address: r.address!, voter: { id: r.id, language: r.language } }));
    });
    if (!ok) return false;
    await pacer.pause(upTo - from, performance.now() - started);
    if (upTo >= limit) {
      this.pacers.delete(run.id);
      await this.finish(run);
    }
    return true;
  }

  /**
   * One chunk in one transaction: the run's cursor moves from `from` to `upTo` only if still at `from` (else
   * another process took the chunk, and this one rolls back); each address not opted out gets a session.
   */
  private async chunk(
    run: SurveyRunRow,
    from: number,
    upTo: number,
    audience: (
      trx: Executor,
    ) => Promise<Array<{ address: string; voter: { id: number; language: string | null } | undefined }>>,
  ): Promise<boolean> {
    const { db } = this.deps;
    const channel = run.channel as MessageChannel;
    try {
      await db.transaction().execute(async (trx) => {
        if (!(await moveRunCursor(trx, run, from, upTo))) throw new ChunkTaken();
        const survey = await surveyOf(trx, run);
        const people = await audience(trx);
        const stopped = await optedOutAddresses(
          trx,
          run.workspace_id,
          channel,
          people.map((p) => p.address),
        );
        let used = 0;
        let optedOut = 0;
        const now = nowIso();
        const language = await defaultLanguage(trx, run.workspace_id);
        for (const p of people) {
          if (stopped.has(p.address)) {
            optedOut += 1;
            continue;
          }
          const opened = await startSession(
            trx,
            {
              survey,
              runId: run.id,
              channel,
              address: p.address,
              voterId: p.voter?.id ?? null,
              voterLanguage: p.voter?.language ?? null,
              defaultLanguage: language,
              accountId: run.channel_account_id,
              now,
            },
            { reserved: true },
          );
          if (opened) {
            used += opened.cost;
            survey.has_run = 1;
          }
        }
        await spendRunReservation(trx, run, used, optedOut);
      });
      return true;
    } catch (error) {
      if (error instanceof ChunkTaken) return false;
      throw error;
    }
  }

  /** The fill is done: what the reservation did not spend goes back, and the recipients are what was reached. */
  private async finish(run: SurveyRunRow): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const filled = await markRunFilled(trx, run);
      if (!filled) return;
      const current = filled.run;
      const credit = creditChannel(current.channel as MessageChannel);
      const left = Math.max(current.reserved_credits, 0);
      if (credit && left > 0)
        await refundCredits(trx, current.workspace_id, credit, left, runRef(run.id), nowIso());
      await updateRun(trx, run.workspace_id, run.id, {
        reserved_credits: 0,
        recipients_total: filled.sessions + current.opted_out,
      });
    });
  }
}
