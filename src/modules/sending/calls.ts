import type { Config } from '../../config.ts';
import { type Db, nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, MessageRow } from '../../db/schema.ts';
import type { MessageErrorCode } from '../../domain.ts';
import type { Channel, MessageProvider, OutgoingMessage, Providers } from '../../providers/provider.ts';
import { accountRef, messageRef } from '../../refs.ts';
import { disableForAuth } from '../channel-accounts/channel-accounts.service.ts';
import { accountsByIds } from '../channel-accounts/channel-accounts.repository.ts';
import { listUnsubscribeHeaders, unsubscribeFooter, unsubscribeUrl } from '../opt-outs/unsubscribe.ts';
import type { AccountProviders } from './accounts.ts';
import type { MessageLifecycle } from './lifecycle.ts';
import { beginCalls, type Handover, scheduleRetry } from './outbox.repository.ts';
import { finalCode, type HandOverResult } from './hand-over.ts';
import { noteCampaignError } from '../campaigns/campaigns.repository.ts';

/**
 * How the delivery worker's claimed batch becomes provider calls (delivery-worker.ts runs them): the calls
 * (`callUnits`), the failures grouped by reason, and how far ahead a lane checks that its messages are still
 * queued.
 */

/** What callUnits reads: the database, the deployment's providers, channel accounts' providers, the config. */
export interface CallDeps {
  db: Db['kysely'];
  providers: Providers;
  accounts: AccountProviders;
  config: Pick<Config, 'appKey' | 'publicBaseUrl' | 'port'>;
}

/**
 * A batch as provider calls: each message through its channel account's provider (or the deployment's),
 * except that a provider taking many recipients in one request (`sendMany`) gets each account's messages of one
 * template together, up to its limit. Messages whose account is gone or switched off fail here.
 */
export async function callUnits(
  deps: CallDeps,
  channel: Channel,
  rows: MessageRow[],
  extras: Map<number, Partial<OutgoingMessage>>,
  failure: (reason: string, code: MessageErrorCode, id: number) => void,
): Promise<Unit[]> {
  // (each account's messages become one lane's calls: see sendBatch)
  const ids = [
    ...new Set(rows.flatMap((r) => (r.channel_account_id !== null ? [r.channel_account_id] : []))),
  ];
  const accounts = new Map((await accountsByIds(deps.db, ids)).map((a) => [a.id, a] as const));
  const units: Unit[] = [];
  const groups = new Map<string, Unit>();
  const sealedElsewhere = new Map<number, ChannelAccountRow>();
  for (const row of rows) {
    const message = { ...withHeaders(deps.config, row), ...extras.get(row.id) };
    const accountId = row.channel_account_id;
    if (accountId === null) {
      units.push({ rows: [row], messages: [message], provider: deps.providers[channel] });
      continue;
    }
    const account = accounts.get(accountId);
    if (!account || account.disabled_at !== null) {
      const ref = accountRef(accountId);
      if (!account)
        failure(
          `The channel account ${ref} was deleted before the message went out.`,
          'provider_rejected',
          row.id,
        );
      else
        failure(
          `The channel account ${ref} is switched off${account.disabled_reason ? ` (${account.disabled_reason})` : ''}.`,
          account.disabled_reason?.startsWith('credentials refused') ? 'auth_failed' : 'provider_rejected',
          row.id,
        );
      continue;
    }
    if (!deps.accounts.readable(account)) {
      sealedElsewhere.set(account.id, account);
      failure(
        `The channel account ${accountRef(accountId)}'s credentials cannot be read: they were sealed under another APP_KEY.`,
        'auth_failed',
        row.id,
      );
      continue;
    }
    const provider = deps.accounts.providerFor(account, channel);
    if (!provider.sendMany || !provider.batchLimit) {
      units.push({ rows: [row], messages: [message], provider, account });
      continue;
    }
    // One request per account, campaign and template (up to the provider's batchLimit recipients), and
    // never more than one second of the account's send rate (a batch takes as many of it as it carries).
    const key = `${accountId}:${row.campaign_id ?? `msg${row.id}`}:${row.template_id ?? ''}`;
    const limit = Math.min(provider.batchLimit, account.send_rate_per_second || Infinity);
    let unit = groups.get(key);
    if (!unit || unit.rows.length >= limit) {
      unit = { rows: [], messages: [], provider, account };
      groups.set(key, unit);
      units.push(unit);
    }
    unit.rows.push(row);
    unit.messages.push(message);
  }
  // As when a provider refuses the credentials: the account is switched off and webhooks are told.
  for (const account of sealedElsewhere.values())
    await disableForAuth(deps.db, account, 'sealed under another APP_KEY; give them again');
  return units;
}

/**
 * Campaign email carries the one-click unsubscribe headers (RFC 8058), and its body ends with the same link
 * for a person to click (a GET shows a page with the button).
 */
function withHeaders(config: Pick<Config, 'appKey' | 'publicBaseUrl' | 'port'>, row: MessageRow) {
  const message = outgoing(row);
  if (row.channel !== 'email' || row.campaign_id === null) return message;
  const { appKey, publicBaseUrl, port } = config;
  const base = publicBaseUrl ?? `http://localhost:${port}`;
  // One link for the header and the footer (each sealing draws a fresh IV).
  const url = unsubscribeUrl(appKey, base, row.workspace_id, row.to);
  return {
    ...message,
    body: message.body + unsubscribeFooter(url),
    headers: listUnsubscribeHeaders(url),
  };
}

/** Messages to fail, grouped by reason: one conditional update (and refund) per reason. */
export class Failures {
  private readonly byReason = new Map<string, { code: MessageErrorCode; ids: number[] }>();

  readonly add = (reason: string, code: MessageErrorCode, id: number): void => {
    const entry = this.byReason.get(reason) ?? { code, ids: [] };
    entry.ids.push(id);
    this.byReason.set(reason, entry);
  };

  async apply(messages: MessageLifecycle): Promise<void> {
    for (const [reason, { code, ids }] of this.byReason) await messages.fail(ids, reason, code);
    this.byReason.clear();
  }
}

/**
 * How far ahead a lane checks its messages still queued (one UPDATE for the next `span` calls): as many calls
 * as its provider answers in CHECK_AHEAD_MS, by the lane's recent call times, at least one and at most
 * CHECK_AHEAD_MAX. A provider that takes 100 ms is checked before every call; the instant sandbox every 64, so a
 * cancel leaves at most a few milliseconds of calls in flight on any lane.
 */
export const CHECK_AHEAD_MS = 5;
export const CHECK_AHEAD_MAX = 64;

export class CallTimes {
  private calls = 0;
  private totalMs = 0;

  add(ms: number): void {
    this.calls += 1;
    this.totalMs += ms;
  }

  span(): number {
    if (this.calls === 0) return 1;
    const each = this.totalMs / this.calls;
    return Math.max(1, Math.min(CHECK_AHEAD_MAX, Math.floor(CHECK_AHEAD_MS / Math.max(each, 0.001))));
  }
}

/**
 * Marks the units' messages as in their provider call (beginCalls) and keeps in each unit only those still
 * queued and claimed by this worker: a cancel that committed since the claim took the rest.
 */
export async function checkStillQueued(db: Db['kysely'], units: Unit[], workerId: string): Promise<void> {
  const live = await beginCalls(
    db,
    units.flatMap((u) => u.rows.map((r) => r.id)),
    workerId,
    nowIso(),
  );
  for (const unit of units) {
    if (unit.rows.every((r) => live.has(r.id))) continue;
    const keep = unit.rows.map((r) => live.has(r.id));
    unit.rows = unit.rows.filter((_, i) => keep[i]);
    unit.messages = unit.messages.filter((_, i) => keep[i]);
  }
}

/** One provider call: one message, or several for a provider that takes many in one request. */
export interface Unit {
  rows: MessageRow[];
  messages: OutgoingMessage[];
  provider: MessageProvider;
  account?: ChannelAccountRow | undefined;
}

function outgoing(row: MessageRow) {
  return {
    channel: row.channel,
    to: row.to,
    body: row.body,
    subject: row.subject ?? undefined,
    mediaUrl: row.media_url ?? undefined,
    templateId: row.template_id ?? undefined,
    reference: messageRef(row.id),
    ...(row.channel === 'ivr' && row.survey_response_id !== null ? { surveyCall: true } : {}),
  };
}

/**
 * A call's answer, message by message: handed over (kept in `handovers` to record), retried on the retry
 * schedule, or failed (in `failures`). A refusal of the account's credentials disables it; the reason is
 * returned, and the lane fails its other messages without a call. A refusal of the whole call is noted on the
 * campaign at once, even while its messages wait for their retries.
 */
export async function applyResults(
  deps: { db: Db['kysely']; retrySchedule: readonly number[]; workerId: string },
  unit: Unit,
  results: HandOverResult[],
  lane: { handovers: Handover[]; failures: Failures; refused: string | undefined },
): Promise<string | undefined> {
  const { db, retrySchedule, workerId } = deps;
  const { handovers, failures } = lane;
  let { refused } = lane;
  const { account } = unit;
  for (const [i, row] of unit.rows.entries()) {
    const result = results[i]!;
    if (result.kind === 'handed') {
      handovers.push(result.handover);
      continue;
    }
    const { reason, code, retryable } = result;
    if (account && !retryable && code === 'auth_failed' && refused === undefined) {
      refused = reason;
      await disableForAuth(db, account, reason);
    }
    if (retryable && row.attempts <= retrySchedule.length) {
      // Never sooner than a 429's or 503's Retry-After.
      const delay = Math.max((retrySchedule[row.attempts - 1] ?? 0) * 1000, result.retryAfterMs);
      await scheduleRetry(db, row.id, workerId, new Date(Date.now() + delay).toISOString(), reason, nowIso());
    } else failures.add(reason, finalCode(result), row.id);
  }
  const whole = results.every((r) => r.kind === 'refused') ? results[0] : undefined;
  if (whole?.kind === 'refused' && whole.code !== 'invalid_recipient')
    await noteCampaignError(
      db,
      unit.rows.flatMap((r) => (r.campaign_id !== null ? [Number(r.campaign_id)] : [])),
      whole.code,
      whole.reason,
      nowIso(),
    );
  return refused;
}
