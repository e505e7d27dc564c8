import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { ChannelLogTable, Database } from '../../db/schema.ts';
import type { ChannelLogRow } from '../../db/schema.outreach.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../lib/json.ts';
import type { Exchange } from '../../providers/http.ts';
import { messageRef } from '../../refs.ts';
import { CALLBACK_TOKEN } from './accounts.ts';

/** A body kept in the log is cut at this many characters. */
export const LOG_BODY_CHARS = 4096;
/** Entries kept per account, and for how long. */
export const LOG_PER_ACCOUNT = 1000;
export const LOG_DAYS = 7;
/** The buffer is written after this long, or once it holds LOG_BATCH entries. */
const FLUSH_MS = 500;
const LOG_BATCH = 200;
/** ...or once its bodies hold this many characters: unredacted answers may be up to MAX_ANSWER_BYTES each. */
const LOG_BATCH_CHARS = 4_000_000;
/** Pruning (older than LOG_DAYS, beyond LOG_PER_ACCOUNT) runs at most this often. */
const PRUNE_MS = 60_000;

export type LogKind = ChannelLogTable['kind'];
type Entry = Omit<ChannelLogTable, 'id'>;

/** An exchange as `add` keeps it: not yet redacted (flush does that, off the send's path). */
interface Pending {
  account: { id: number; workspace_id: number };
  kind: LogKind;
  exchange: Exchange;
  at: string;
  direction: 'out' | 'in';
  messageId: number | null;
  errorCode: string | null;
  secrets: readonly string[];
}

/** A pending exchange as the log keeps it: secrets `***`, numbers and addresses masked, texts as their length. */
function redacted(p: Pending): Entry {
  const e = p.exchange;
  return {
    workspace_id: p.account.workspace_id,
    channel_account_id: p.account.id,
    at: p.at,
    direction: p.direction,
    kind: p.kind,
    method: e.method.slice(0, 10),
    url: redactUrl(e.url, p.secrets),
    status: e.status,
    duration_ms: e.durationMs === null ? null : Math.round(e.durationMs),
    request: redactBody(e.request, p.secrets, true),
    response: redactBody(e.response, p.secrets, p.direction === 'in'),
    message_id: p.messageId,
    error_code: p.errorCode,
  };
}

/** Keys whose values are secrets wherever they stand (a body, a query string). */
const SECRET_KEY =
  /^(authkey|auth_?token|access_?token|api_?key|api_?token|token|password|secret|signature|app_secret|verify_token|hub\.verify_token)$/i;
/** Keys whose values are a message's text (or a template's values): only their length is kept. */
const TEXT_KEY = /^(body|message|text|content|caption|subject|html|msg|sms|speech|say)$/i;
/** Keys inside a batch's `recipients` other than the number: a template's values, personal. */
const NUMBER_KEY = /^(mobiles?|to|from|number|phone|msisdn|wa_id|recipient|callerid)$/i;
/** A run of 10-15 digits standing alone (not inside a provider's id such as `3763646c0000000000000001`). */
const PHONE = /(?<![\w+])\+?\d[\d ]{8,16}\d(?!\w)/g;
const EMAIL = /[^\s<>"':;,@/?&=]{1,64}@[^\s<>"':;,@/?&=]{1,255}/g;

/** A phone number or an email address with its last 4 characters kept. */
const lastFour = (value: string) =>
  `${'*'.repeat(Math.max(0, Math.min(value.length - 4, 12)))}${value.slice(-4)}`;

function maskAddresses(text: string): string {
  return text
    .replace(EMAIL, lastFour)
    .replace(PHONE, (m) => (m.replace(/\D/g, '').length >= 10 ? lastFour(m) : m));
}

/**
 * A body (JSON, a form, or text) as the log keeps it: secrets `***`, phone numbers and email addresses with their
 * last 4 characters, message texts `[n characters]` (where `texts` is set: what we send and what callers send us;
 * a provider's own answers keep their words), cut at LOG_BODY_CHARS.
 */
export function redactBody(body: string, secrets: readonly string[], texts: boolean): string {
  let text = body;
  for (const secret of secrets) if (secret.length >= 4) text = text.split(secret).join('***');
  const walk = (value: unknown, key: string, inRecipients: boolean): unknown => {
    if (typeof value === 'string') {
      if (SECRET_KEY.test(key)) return '***';
      if (texts && (TEXT_KEY.test(key) || (inRecipients && !NUMBER_KEY.test(key))))
        return `[${value.length} characters]`;
      return maskAddresses(value);
    }
    if (Array.isArray(value)) return value.map((v) => walk(v, key, inRecipients || key === 'recipients'));
    if (value && typeof value === 'object')
      return Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, walk(v, k, inRecipients || key === 'recipients')]),
      );
    return value;
  };
  const trimmed = text.trim();
  let out: string | undefined;
  if ((trimmed.startsWith('{') || trimmed.startsWith('[')) && !nestsDeeperThan(trimmed, MAX_JSON_DEPTH)) {
    try {
      out = JSON.stringify(walk(JSON.parse(trimmed), '', false));
    } catch {
      // not JSON after all: read as a form or text below
    }
  }
  if (out === undefined && /^[^\s=&]+=[^\s]*(&[^\s=&]+=[^\s]*)*$/.test(trimmed)) {
    const form = new URLSearchParams(trimmed);
    const kept = new URLSearchParams();
    for (const [k, v] of form) kept.append(k, String(walk(v, k, false)));
    out = decodeURIComponent(
      kept
        .toString()
        .replace(/\+/g, ' ')
        .replace(/%(?![0-9A-F]{2})/gi, '%25'),
    );
  }
  out ??=
    texts && trimmed !== '' && !/^<\?xml|^<Response/i.test(trimmed)
      ? `[${trimmed.length} characters]`
      : maskAddresses(text);
  return out.length > LOG_BODY_CHARS ? `${out.slice(0, LOG_BODY_CHARS)}…` : out;
}

/** A URL as the log keeps it: secret query values `***`, numbers and addresses masked, our callback token hidden. */
export function redactUrl(url: string, secrets: readonly string[]): string {
  let text = url;
  for (const secret of secrets) if (secret.length >= 4) text = text.split(secret).join('***');
  text = text.replace(CALLBACK_TOKEN, '$1***');
  text = text.replace(/([?&])([^=&]+)=([^&]*)/g, (m, sep: string, k: string) =>
    SECRET_KEY.test(decodeURIComponent(k)) ? `${sep}${k}=***` : m,
  );
  return maskAddresses(text).slice(0, 1000);
}

/**
 * The channel log's writer: exchanges are kept in memory and written after, in batches (a send never waits for
 * them), then pruned to LOG_DAYS and LOG_PER_ACCOUNT. One per database handle (`channelLogFor`).
 */
export class ChannelLog {
  private buffer: Pending[] = [];
  private bufferedChars = 0;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private prunedAt = 0;
  private readonly touched = new Set<number>();

  constructor(private readonly db: Kysely<Database>) {}

  /**
   * One provider call's exchanges (or one callback), for the account; redacted and written within FLUSH_MS.
   * Only kept here: nothing is parsed or masked on the send's path.
   */
  add(
    account: { id: number; workspace_id: number },
    kind: LogKind,
    exchanges: readonly Exchange[],
    facts: {
      messageId: number | null;
      errorCode: string | null;
      secrets: readonly string[];
      direction?: 'out' | 'in';
    },
  ): void {
    const direction = facts.direction ?? 'out';
    for (const exchange of exchanges) {
      this.bufferedChars += exchange.request.length + exchange.response.length;
      this.buffer.push({
        account,
        kind,
        exchange,
        at: exchange.at ?? nowIso(),
        direction,
        messageId: facts.messageId,
        errorCode: facts.errorCode,
        secrets: facts.secrets,
      });
    }
    this.touched.add(account.id);
    if (this.buffer.length >= LOG_BATCH || this.bufferedChars >= LOG_BATCH_CHARS) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS).unref();
  }

  /** Writes what is buffered (and prunes, now and then); resolves once it is written. Never throws. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    this.bufferedChars = 0;
    this.writing = this.writing.then(async () => {
      try {
        for (let i = 0; i < batch.length; i += 100)
          await this.db
            .insertInto('channel_log')
            .values(batch.slice(i, i + 100).map(redacted))
            .execute();
        if (Date.now() - this.prunedAt >= PRUNE_MS) await this.prune();
      } catch {
        // The log is a help, never a failure of the send: a batch the database refused is dropped.
      }
    });
    return this.writing;
  }

  private async prune(): Promise<void> {
    this.prunedAt = Date.now();
    const before = new Date(Date.now() - LOG_DAYS * 86_400_000).toISOString();
    await this.db.deleteFrom('channel_log').where('at', '<', before).execute();
    const accounts = [...this.touched];
    this.touched.clear();
    for (const id of accounts) {
      const last = await this.db
        .selectFrom('channel_log')
        .select('id')
        .where('channel_account_id', '=', id)
        .orderBy('id', 'desc')
        .offset(LOG_PER_ACCOUNT - 1)
        .limit(1)
        .executeTakeFirst();
      if (last)
        await this.db
          .deleteFrom('channel_log')
          .where('channel_account_id', '=', id)
          .where('id', '<', last.id)
          .execute();
    }
  }
}

const logs = new WeakMap<object, ChannelLog>();

/** The database handle's channel log writer (the API's single sends and the worker's lanes share it). */
export function channelLogFor(db: Kysely<Database>): ChannelLog {
  let log = logs.get(db);
  if (!log) {
    log = new ChannelLog(db);
    logs.set(db, log);
  }
  return log;
}

/** An entry as the API answers it (GET /api/channel-accounts/{id}/log). */
export function logItem(row: ChannelLogRow) {
  return {
    id: row.id,
    at: row.at,
    direction: row.direction,
    kind: row.kind,
    method: row.method,
    url: row.url,
    status: row.status,
    duration_ms: row.duration_ms,
    request: row.request,
    response: row.response,
    message_id: row.message_id === null ? null : messageRef(row.message_id),
    error_code: row.error_code,
  };
}

/**
 * A page of the account's log, newest first, among its newest LOG_PER_ACCOUNT entries (pruning may lag a
 * minute behind); what this process still holds is written first.
 */
export async function logPage(
  db: Kysely<Database>,
  workspaceId: number,
  accountId: number,
  page: number,
  perPage: number,
) {
  await channelLogFor(db).flush();
  const since = new Date(Date.now() - LOG_DAYS * 86_400_000).toISOString();
  const floor = await db
    .selectFrom('channel_log')
    .select('id')
    .where('channel_account_id', '=', accountId)
    .orderBy('id', 'desc')
    .offset(LOG_PER_ACCOUNT - 1)
    .limit(1)
    .executeTakeFirst();
  const base = db
    .selectFrom('channel_log')
    .where('workspace_id', '=', workspaceId)
    .where('channel_account_id', '=', accountId)
    .where('at', '>=', since)
    .$if(floor !== undefined, (q) => q.where('id', '>=', floor!.id));
  const [rows, counted] = await Promise.all([
    base
      .selectAll()
      .orderBy('id', 'desc')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows: rows.map(logItem), total: Number(counted.n) };
}
