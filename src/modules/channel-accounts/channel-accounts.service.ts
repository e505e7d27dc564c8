import { randomBytes } from 'node:crypto';
import { logPage } from '../sending/channel-log.ts';
import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database, TemplateRow } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { type FieldErrors, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import { accountSecretBox, callbackUrl } from '../sending/accounts.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { providerIdsOf } from '../templates/templates.service.ts';
import { emitEvent } from '../webhooks/webhooks.events.ts';
import {
  accountsOfWorkspace,
  claimDefaults,
  deleteAccount,
  findAccount,
  insertAccount,
  listAccounts,
  updateAccount,
  disableAccount,
} from './channel-accounts.repository.ts';
import { adapterNamed } from '../../providers/registry.ts';
import { sendsTemplatesOnly } from '../../providers/adapter.ts';
import { checkAccount, defaultChannels, type SettingValue } from './channel-accounts.rules.ts';
import { accountRef, parseRef, templateRef } from '../../refs.ts';

export interface CreateAccountInput {
  name: string;
  provider: string;
  channels?: MessageChannel[] | undefined;
  settings?: Record<string, SettingValue> | undefined;
  credentials?: Record<string, string> | undefined;
  default_for?: MessageChannel[] | undefined;
  send_rate_per_second?: number | null | undefined;
  active?: boolean | undefined;
}

export interface UpdateAccountInput extends Partial<Omit<CreateAccountInput, 'provider'>> {
  rotate_callback_token?: boolean | undefined;
}

const newToken = () => randomBytes(24).toString('base64url');
const json = <T>(text: string) => JSON.parse(text) as T;

/** The callback URLs of an account: `<base>/api/providers/<provider>/cha_<n>/<token>/<kind>`. */
export function callbackUrls(row: ChannelAccountRow, token: string, base: string): Record<string, string> {
  return Object.fromEntries(
    adapterNamed(row.provider).callbacks.map((kind) => [kind, callbackUrl(base, row, token, kind)]),
  );
}

/**
 * The account to carry a message on `channel`: the one named (`channel_account_id`: an active account of
 * the workspace that serves the channel, else 422 naming the field), else the workspace's default active
 * account for the channel, else none (the deployment's provider).
 */
export async function accountForSend(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  given: string | undefined,
): Promise<ChannelAccountRow | undefined> {
  if (given === undefined) {
    const carrier = await channelCarrier(db, workspaceId, channel);
    if (carrier.off)
      throw validationError({
        channel_account_id: [carrierProblem(channel, carrier.off, carrier.noDefault)],
      });
    return carrier.account;
  }
  const id = parseRef('cha', given);
  const row = id === undefined ? undefined : await findAccount(db, workspaceId, id);
  const problem = !row
    ? 'is not a channel account of this workspace (cha_<n>).'
    : row.disabled_at !== null
      ? `is ${given}, which is switched off (active: false)${row.disabled_reason ? `: ${row.disabled_reason}` : ''}. Switch it on with PATCH /api/channel-accounts/${given} {"active": true}.`
      : !json<string[]>(row.channels).includes(channel)
        ? `is ${given}, which is not for ${channel} (its channels: ${json<string[]>(row.channels).join(', ')}).`
        : undefined;
  if (problem) throw validationError({ channel_account_id: [problem] });
  return row;
}

/**
 * What carries `channel` for the workspace now (the contract's fifth part, "No silent re-routing"): its default
 * account. A default that is switched off (by the office, or by `auth_failed`) is `off`, and so is the channel of
 * a workspace whose accounts for it have no default: sends and campaigns are then 422 until the office switches
 * it on or names another default. The service never moves a channel to another account by itself (sender ids
 * and DLT templates belong to one gateway), nor to the deployment's provider. Neither: the workspace has no
 * account for the channel (the deployment's provider carries it).
 */
export async function channelCarrier(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
): Promise<Carrier> {
  return carrierAmong(await accountsOfWorkspace(db, workspaceId), channel);
}

export interface Carrier {
  account?: ChannelAccountRow;
  /** The channel's default, switched off; or, with no default, the first of its accounts (`noDefault`). */
  off?: ChannelAccountRow;
  noDefault?: boolean;
}

/** channelCarrier's choice among accounts already read (all of one workspace's). */
export function carrierAmong(accounts: readonly ChannelAccountRow[], channel: MessageChannel): Carrier {
  const serving = accounts
    .filter((row) => json<string[]>(row.channels).includes(channel))
    .sort((a, b) => Number(a.id) - Number(b.id));
  if (serving.length === 0) return {};
  const chosen = serving.find((row) => json<string[]>(row.default_for).includes(channel));
  if (!chosen) return { off: serving[0]!, noDefault: true };
  return chosen.disabled_at === null ? { account: chosen } : { off: chosen };
}

/** Why a channel has no carrier now, and what the office does about it (a 422 on `channel_account_id`). */
export function carrierProblem(channel: MessageChannel, off: ChannelAccountRow, noDefault = false): string {
  const ref = accountRef(off.id);
  const why = off.disabled_reason ? `: ${off.disabled_reason}` : '';
  const never =
    'The service never moves a channel to another account by itself: sender ids and DLT templates belong to one gateway.';
  if (noDefault || off.disabled_at === null)
    return `${channel} has accounts of this workspace but no default one. Make one the default (PATCH /api/channel-accounts/${ref} {"default_for": ["${channel}"]}) or name it in channel_account_id. ${never}`;
  return `${channel} goes through this workspace's default account ${ref} ("${off.name}", ${adapterNamed(off.provider).label}), which is switched off${why}. Switch it on (PATCH /api/channel-accounts/${ref} {"active": true}) or make another account the default for ${channel}. ${never}`;
}

/**
 * A provider that sends only its own templates: a message through its account needs a `tpl_` template with
 * `provider_template_ids.<provider>` (422 on `template_id` otherwise).
 */
export function templateForAccount(
  account: ChannelAccountRow | undefined,
  template: TemplateRow | undefined,
  errors: FieldErrors,
): void {
  const adapter = account ? adapterNamed(account.provider) : undefined;
  if (!account || adapter?.templates?.sends !== 'only') return;
  const name = adapter.name;
  const who = `${adapter.label} (${accountRef(account.id)})`;
  if (!(template && providerIdsOf(template)[name]))
    errors.template_id = [
      template
        ? `is ${templateRef(template.id)}, which has no provider_template_ids.${name}: ${who} sends SMS only through its own templates.`
        : `is required: ${who} sends SMS only through a tpl_<n> template with provider_template_ids.${name}.`,
    ];
}

/**
 * Each workspace's own provider accounts (contract, third part, "Channel accounts"): credentials sealed at
 * rest and never returned, one default per channel, callback URLs with a per-account secret token.
 */
export class ChannelAccountsService {
  private readonly box: SecretBox;

  constructor(
    private readonly deps: {
      db: Kysely<Database>;
      appKey: Buffer;
      publicBaseUrl: string;
      dltEnforce: boolean;
    },
  ) {
    this.box = accountSecretBox(deps.appKey);
  }

  item(row: ChannelAccountRow) {
    // Sealed under another APP_KEY: no callback URL can be shown until a PATCH gives the credentials again.
    const token = this.box.openOr(row.callback_token);
    const verifyToken = row.verify_token ? this.box.openOr(row.verify_token) : undefined;
    return {
      id: accountRef(row.id),
      name: row.name,
      provider: row.provider,
      channels: json<MessageChannel[]>(row.channels),
      settings: json<Record<string, SettingValue>>(row.settings),
      credentials_set: json<string[]>(row.credentials_set),
      default_for: json<MessageChannel[]>(row.default_for),
      send_rate_per_second: row.send_rate_per_second,
      active: row.disabled_at === null,
      templates_only: json<MessageChannel[]>(row.channels).some((channel) =>
        sendsTemplatesOnly(adapterNamed(row.provider), channel, this.deps.dltEnforce),
      ),
      disabled_reason: row.disabled_reason,
      callback_urls: token === undefined ? {} : callbackUrls(row, token, this.deps.publicBaseUrl),
      ...(adapterNamed(row.provider).verifyToken && verifyToken !== undefined
        ? { verify_token: verifyToken }
        : {}),
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }

  async create(workspaceId: number, actor: AuditActor, input: CreateAccountInput) {
    const settings = input.settings ?? {};
    const credentials = input.credentials ?? {};
    const adapter = adapterNamed(input.provider);
    const channels = input.channels ?? defaultChannels(adapter, settings);
    const errors: FieldErrors = {};
    if (input.name.trim() === '') errors.name = ['must not be empty.'];
    checkAccount(adapter, channels, settings, credentials, errors);
    checkDefaults(channels, input.default_for ?? [], errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      // The first active account a workspace adds for a channel becomes its default there.
      const current = await accountsOfWorkspace(trx, workspaceId);
      const hasDefault = (channel: MessageChannel) =>
        current.some((row) => json<string[]>(row.default_for).includes(channel));
      const defaults = unique([
        ...(input.default_for ?? []),
        ...(input.active === false ? [] : channels.filter((channel) => !hasDefault(channel))),
      ]);
      const row = await insertAccount(trx, {
        workspace_id: workspaceId,
        name: input.name.trim(),
        provider: input.provider,
        channels: JSON.stringify(unique(channels)),
        settings: JSON.stringify(settings),
        credentials: this.box.seal(JSON.stringify(credentials)),
        credentials_set: JSON.stringify(Object.keys(credentials).sort()),
        default_for: JSON.stringify(input.active === false ? [] : unique(defaults)),
        send_rate_per_second: input.send_rate_per_second ?? null,
        disabled_at: input.active === false ? now : null,
        disabled_reason: input.active === false ? 'switched off' : null,
        callback_token: this.box.seal(newToken()),
        verify_token: adapter.verifyToken ? this.box.seal(newToken()) : null,
        created_at: now,
        updated_at: now,
      });
      await this.moveDefaults(trx, workspaceId, input.active === false ? [] : defaults, row.id, now);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'channel_account.created',
        target: { type: 'channel_account', id: accountRef(row.id) },
        details: { name: row.name, provider: row.provider, channels, default_for: defaults },
      });
      return this.item(row);
    });
  }

  async list(workspaceId: number, query: { page: number; per_page: number }) {
    const { rows, total } = await listAccounts(this.deps.db, workspaceId, query.page, query.per_page);
    return pageResult(
      rows.map((row) => this.item(row)),
      total,
      query.page,
      query.per_page,
    );
  }

  async get(workspaceId: number, ref: string) {
    return this.item(await this.find(this.deps.db, workspaceId, ref));
  }

  /** A page of the account's channel log, newest first (404 for another workspace's account). */
  async log(workspaceId: number, ref: string, query: { page: number; per_page: number }) {
    const row = await this.find(this.deps.db, workspaceId, ref);
    const { rows, total } = await logPage(this.deps.db, workspaceId, row.id, query.page, query.per_page);
    return pageResult(rows, total, query.page, query.per_page);
  }

  async update(workspaceId: number, actor: AuditActor, ref: string, input: UpdateAccountInput) {
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await this.find(trx, workspaceId, ref);
      const settings = { ...json<Record<string, SettingValue>>(row.settings), ...input.settings };
      const given = input.credentials ?? {};
      // Credentials sealed under another APP_KEY are gone: the PATCH must give them all again (422 otherwise),
      // and the account gets new callback and verify tokens (the old URLs could not be checked anyway).
      const sealedElsewhere = this.box.openOr(row.credentials) === undefined;
      const credentials = {
        ...(sealedElsewhere ? {} : json<Record<string, string>>(this.box.open(row.credentials))),
        ...given,
      };
      const lostToken = this.box.openOr(row.callback_token) === undefined;
      const lostVerify = row.verify_token !== null && this.box.openOr(row.verify_token) === undefined;
      const channels = input.channels ?? json<MessageChannel[]>(row.channels);
      const active = input.active ?? row.disabled_at === null;
      // Switched off, it stays its channels' default (their sends are 422 until it is on again or another is
      // made the default: nothing moves by itself). Switched on, it becomes the default of its channels that
      // have none, as the first account added for a channel does.
      const others = (await accountsOfWorkspace(trx, workspaceId)).filter((a) => a.id !== row.id);
      const undefaulted = (c: MessageChannel) =>
        !others.some((a) => json<string[]>(a.default_for).includes(c));
      const kept = json<MessageChannel[]>(row.default_for).filter((c) => channels.includes(c));
      const defaults =
        input.default_for ??
        (active && row.disabled_at !== null ? unique([...kept, ...channels.filter(undefaulted)]) : kept);
      const errors: FieldErrors = {};
      if (input.name !== undefined && input.name.trim() === '') errors.name = ['must not be empty.'];
      // Only what this request gives is checked against the provider's rules, and the whole for what is required.
      checkAccount(adapterNamed(row.provider), channels, settings, credentials, errors);
      if (input.default_for !== undefined) checkDefaults(channels, input.default_for, errors);
      if (Object.keys(errors).length > 0) throw validationError(errors);
      const now = nowIso();
      await this.moveDefaults(trx, workspaceId, defaults, row.id, now);
      const updated = await updateAccount(trx, workspaceId, row.id, {
        ...(input.name !== undefined ? { name: input.name.trim() } : {}),
        channels: JSON.stringify(unique(channels)),
        settings: JSON.stringify(settings),
        ...(input.credentials !== undefined || sealedElsewhere
          ? {
              credentials: this.box.seal(JSON.stringify(credentials)),
              credentials_set: JSON.stringify(Object.keys(credentials).sort()),
            }
          : {}),
        default_for: JSON.stringify(unique(defaults)),
        ...(input.send_rate_per_second !== undefined
          ? { send_rate_per_second: input.send_rate_per_second }
          : {}),
        ...(active
          ? { disabled_at: null, disabled_reason: null }
          : row.disabled_at === null
            ? { disabled_at: now, disabled_reason: 'switched off' }
            : {}),
        ...(input.rotate_callback_token || lostToken ? { callback_token: this.box.seal(newToken()) } : {}),
        ...(lostVerify ? { verify_token: this.box.seal(newToken()) } : {}),
        updated_at: now,
      });
      if (!updated) throw notFound('Channel account');
      const changed = Object.keys(input).filter((k) => k !== 'credentials');
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'channel_account.updated',
        target: { type: 'channel_account', id: accountRef(row.id) },
        details: {
          changed,
          ...(input.credentials !== undefined ? { credentials_changed: Object.keys(given).sort() } : {}),
        },
      });
      return this.item(updated);
    });
  }

  async remove(workspaceId: number, actor: AuditActor, ref: string): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      const row = await this.find(trx, workspaceId, ref);
      if (!(await deleteAccount(trx, workspaceId, row.id))) throw notFound('Channel account');
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'channel_account.deleted',
        target: { type: 'channel_account', id: accountRef(row.id) },
        details: { name: row.name, provider: row.provider },
      });
    });
  }

  private async find(db: Executor, workspaceId: number, ref: string): Promise<ChannelAccountRow> {
    const id = parseRef('cha', ref);
    const row = id === undefined ? undefined : await findAccount(db, workspaceId, id);
    if (!row) throw notFound('Channel account');
    return row;
  }

  /**
   * One default per channel: `channels` become `account`'s and stop being the default of the workspace's other
   * accounts. The channels' keys are taken first (claimDefaults), so concurrent changes of one channel's
   * default run one after the other.
   */
  private async moveDefaults(
    trx: Executor,
    workspaceId: number,
    channels: readonly MessageChannel[],
    account: number,
    now: string,
  ): Promise<void> {
    await claimDefaults(trx, workspaceId, account, unique(channels), now);
    if (channels.length === 0) return;
    const except = account;
    for (const other of await accountsOfWorkspace(trx, workspaceId)) {
      if (other.id === except) continue;
      const before = json<MessageChannel[]>(other.default_for);
      const after = before.filter((c) => !channels.includes(c));
      if (after.length !== before.length)
        await updateAccount(trx, workspaceId, other.id, {
          default_for: JSON.stringify(after),
          updated_at: now,
        });
    }
  }
}

const unique = <T>(list: readonly T[]) => [...new Set(list)];

function checkDefaults(
  channels: readonly MessageChannel[],
  defaults: readonly MessageChannel[],
  errors: FieldErrors,
) {
  const foreign = defaults.filter((c) => !channels.includes(c));
  if (foreign.length > 0)
    errors.default_for = [
      `names ${foreign.join(', ')}, which this account is not for (its channels: ${channels.join(', ')}).`,
    ];
}

/**
 * The provider refused the account's credentials: the account is switched off, its channels' sends are 422
 * until the office gives new credentials and switches it on (or makes another account the default), and the
 * office hears of it through `channel_account.failed`.
 */
export async function disableForAuth(
  db: Kysely<Database>,
  row: ChannelAccountRow,
  reason: string,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const now = nowIso();
    if (!(await disableAccount(trx, row.id, reason, now))) return;
    await emitEvent(trx, row.workspace_id, 'channel_account.failed', {
      id: accountRef(row.id),
      name: row.name,
      provider: row.provider,
      error_code: 'auth_failed',
      error_message: reason.slice(0, 500),
      failed_at: now,
    });
  });
}
