import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, TemplateRow } from '../../db/schema.ts';
import type { MessageChannel, TemplateCategory } from '../../domain.ts';
import type { Executor } from '../../db/types.ts';
import { type FieldErrors, notFound, validationError } from '../../errors.ts';
import { pageResult } from '../../domain.ts';
import {
  renderTemplate,
  templateVariables,
  unknownVariables,
  variableValues,
  type VariableOverrides,
  type VoterFields,
} from '../sending/render.ts';
import type { ProviderTemplate } from '../../providers/provider.ts';
import { adapterOf } from '../../providers/registry.ts';
import { unitCost } from '../messages/messages.rules.ts';
import { smsEncoding, smsSegments } from '../../lib/sms.ts';
import {
  deleteTemplate,
  findTemplate,
  insertTemplate,
  listTemplates,
  updateTemplate,
  votersByAddress,
} from './templates.repository.ts';
import { isTemplateRef, parseRef, templateRef, templateNumber } from '../../refs.ts';

export interface TemplateInput {
  name: string;
  channel: MessageChannel;
  body: string;
  language?: string | undefined;
  category?: TemplateCategory | undefined;
  dlt_template_id?: string | null | undefined;
  sender_id?: string | null | undefined;
  subject?: string | null | undefined;
  provider_template_ids?: Partial<ProviderTemplateIds> | null | undefined;
}

/** A template's id with each provider that keeps its own (registry.ts `templateProviders`), by provider name. */
export type ProviderTemplateIds = Record<string, string>;

/** A template's ids at the providers that keep their own copy. */
export function providerIdsOf(row: Pick<TemplateRow, 'provider_template_ids'>): ProviderTemplateIds {
  return row.provider_template_ids ? (JSON.parse(row.provider_template_ids) as ProviderTemplateIds) : {};
}

function storedProviderIds(ids: Partial<ProviderTemplateIds> | null | undefined): string | null | undefined {
  if (ids === undefined) return undefined;
  const kept = Object.fromEntries(
    Object.entries(ids ?? {})
      .map(([k, v]) => [k, typeof v === 'string' ? v.trim() : ''])
      .filter(([, v]) => v !== ''),
  );
  return Object.keys(kept).length > 0 ? JSON.stringify(kept) : null;
}

export function templateItem(row: TemplateRow) {
  return {
    id: templateRef(row.id),
    name: row.name,
    channel: row.channel,
    body: row.body,
    language: row.language,
    category: row.category,
    dlt_template_id: row.dlt_template_id,
    sender_id: row.sender_id,
    subject: row.subject,
    provider_template_ids: providerIdsOf(row),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function checkTemplate(input: Partial<TemplateInput>, errors: FieldErrors): void {
  if (input.name !== undefined && input.name.trim() === '') errors.name = ['must not be empty.'];
  if (input.body !== undefined) {
    if (input.body.trim() === '') errors.body = ['must not be empty.'];
    const unknown = unknownVariables(input.body);
    if (unknown.length > 0) {
      errors.body = [
        `uses ${unknown.map((v) => `{{${v}}}`).join(', ')}: the variables are ${templateVariables.map((v) => `{{${v}}}`).join(', ')}.`,
      ];
    }
  }
}

const blankToNull = (value: string | null | undefined) =>
  value === undefined ? undefined : value?.trim() || null;

/** Message templates (`tpl_<n>`) whose voter variables are rendered per recipient. */
export class TemplatesService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  /**
   * The text the service would send for a template (or a body) and a voter, with its SMS parts and its credits:
   * the one renderer (the console uses it), fallbacks (`{{first_name|friend}}`) included.
   */
  async render(
    workspaceId: number,
    input: {
      template_id?: string | undefined;
      body?: string | undefined;
      voter_id?: number | undefined;
      channel?: MessageChannel | undefined;
    },
  ) {
    const { db } = this.deps;
    const errors: FieldErrors = {};
    if ((input.template_id === undefined) === (input.body === undefined))
      errors.template_id = ['give either template_id or body (one of them).'];
    let body = input.body ?? '';
    let channel: MessageChannel = input.channel ?? 'sms';
    if (input.template_id !== undefined) {
      const template = isTemplateRef(input.template_id)
        ? await findTemplate(db, workspaceId, templateNumber(input.template_id))
        : undefined;
      if (!template) errors.template_id = ['is not a template of this workspace (tpl_<n>).'];
      else {
        body = template.body;
        channel = template.channel;
      }
    }
    const unknown = input.body !== undefined ? unknownVariables(body) : [];
    if (unknown.length > 0)
      errors.body = [
        `uses ${unknown.map((v) => `{{${v}}}`).join(', ')}: the variables are ${templateVariables.map((v) => `{{${v}}}`).join(', ')}.`,
      ];
    let voter: VoterFields | undefined;
    if (input.voter_id !== undefined) {
      voter = await db
        .selectFrom('voters')
        .select(['name', 'constituency', 'booth', 'ward'])
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', input.voter_id)
        .executeTakeFirst();
      if (!voter) errors.voter_id = ['is not a voter of this workspace.'];
    }
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const text = renderTemplate(body, voter);
    return {
      channel,
      text,
      sms_parts: channel === 'sms' ? smsSegments(text) : null,
      encoding: channel === 'sms' ? smsEncoding(text) : null,
      credits: unitCost(channel, text),
    };
  }

  async create(workspaceId: number, input: TemplateInput) {
    const errors: FieldErrors = {};
    checkTemplate(input, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const now = nowIso();
    const row = await insertTemplate(this.deps.db, {
      workspace_id: workspaceId,
      name: input.name.trim(),
      channel: input.channel,
      body: input.body,
      language: input.language?.trim() || 'en',
      category: input.category ?? 'promotional',
      dlt_template_id: blankToNull(input.dlt_template_id) ?? null,
      sender_id: blankToNull(input.sender_id) ?? null,
      subject: blankToNull(input.subject) ?? null,
      provider_template_ids: storedProviderIds(input.provider_template_ids) ?? null,
      created_at: now,
      updated_at: now,
    });
    return templateItem(row);
  }

  async list(
    workspaceId: number,
    query: { page: number; per_page: number; channel?: MessageChannel | undefined },
  ) {
    const { rows, total } = await listTemplates(
      this.deps.db,
      workspaceId,
      { channel: query.channel },
      query.page,
      query.per_page,
    );
    return pageResult(rows.map(templateItem), total, query.page, query.per_page);
  }

  async get(workspaceId: number, ref: string) {
    return templateItem(await this.find(this.deps.db, workspaceId, ref));
  }

  async update(workspaceId: number, ref: string, input: Partial<TemplateInput>) {
    const errors: FieldErrors = {};
    checkTemplate(input, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const existing = await this.find(this.deps.db, workspaceId, ref);
    const row = await updateTemplate(this.deps.db, workspaceId, existing.id, {
      ...(input.name !== undefined ? { name: input.name.trim() } : {}),
      ...(input.channel !== undefined ? { channel: input.channel } : {}),
      ...(input.body !== undefined ? { body: input.body } : {}),
      ...(input.language !== undefined ? { language: input.language.trim() || 'en' } : {}),
      ...(input.category !== undefined ? { category: input.category } : {}),
      ...(input.dlt_template_id !== undefined ? { dlt_template_id: blankToNull(input.dlt_template_id) } : {}),
      ...(input.sender_id !== undefined ? { sender_id: blankToNull(input.sender_id) } : {}),
      ...(input.subject !== undefined ? { subject: blankToNull(input.subject) } : {}),
      ...(input.provider_template_ids !== undefined
        ? { provider_template_ids: storedProviderIds(input.provider_template_ids) }
        : {}),
      updated_at: nowIso(),
    });
    if (!row) throw notFound('Template');
    return templateItem(row);
  }

  async remove(workspaceId: number, ref: string): Promise<void> {
    const row = await this.find(this.deps.db, workspaceId, ref);
    if (!(await deleteTemplate(this.deps.db, workspaceId, row.id))) throw notFound('Template');
  }

  private async find(db: Executor, workspaceId: number, ref: string): Promise<TemplateRow> {
    const id = parseRef('tpl', ref);
    const row = id === undefined ? undefined : await findTemplate(db, workspaceId, id);
    if (!row) throw notFound('Template');
    return row;
  }
}

interface Content {
  channel: MessageChannel;
  message?: string | undefined;
  subject?: string | undefined;
  template_id?: string | undefined;
}

/**
 * Send, broadcast and campaigns: a `template_id` of ours (`tpl_<n>`) stands in for `message` (its body, with
 * its variables still in it; rendered per recipient) and, for email, gives the subject unless one is given.
 * Any other template_id is a WhatsApp provider template, passed on as before. With DLT_ENFORCE an SMS needs a
 * template of ours with a DLT template id and a sender id. A request that gives both a `message` and a
 * template of ours is refused (which text would go out?), except where the message is the campaign's stored
 * one (`storedMessage`: a PATCH that changes the template). Throws 422 naming the field.
 */
export async function withTemplate<T extends Content>(
  db: Executor,
  workspaceId: number,
  input: T,
  dltEnforce: boolean,
  storedMessage = false,
): Promise<T & { message: string; template?: TemplateRow }> {
  let template: TemplateRow | undefined;
  if (isTemplateRef(input.template_id)) {
    if (input.message !== undefined && !storedMessage) {
      throw validationError({
        message: [`must be left out when template_id is ${input.template_id}: the template gives the text.`],
      });
    }
    template = await findTemplate(db, workspaceId, templateNumber(input.template_id));
    if (!template) throw validationError({ template_id: ['is not a template of this workspace.'] });
    if (template.channel !== input.channel) {
      throw validationError({
        template_id: [`is a ${template.channel} template; this message goes by ${input.channel}.`],
      });
    }
  }
  if (
    dltEnforce &&
    input.channel === 'sms' &&
    (!template || !template.dlt_template_id || !template.sender_id)
  ) {
    const given = template;
    const lacking = given && ['dlt_template_id', 'sender_id'].filter((f) => !given[f as 'sender_id']);
    throw validationError({
      template_id: [
        lacking
          ? `is ${templateRef(given.id)}, which has no ${lacking.join(' and no ')}: DLT_ENFORCE needs a template registered with both.`
          : 'is required for SMS while DLT_ENFORCE is on: a tpl_<n> template with a dlt_template_id and a sender_id.',
      ],
    });
  }
  if (template) {
    return {
      ...input,
      message: template.body,
      subject: input.subject ?? template.subject ?? undefined,
      template,
    };
  }
  if (input.message === undefined)
    throw validationError({ message: ['is required unless template_id is a tpl_<n> template.'] });
  return { ...input, message: input.message };
}

/** A template body rendered for one recipient (a voter of the workspace by phone, or by email). */
export async function renderFor(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  to: string,
  body: string,
  overrides?: VariableOverrides,
): Promise<{ text: string; voter: VoterFields | undefined }> {
  const voters = await votersByAddress(db, workspaceId, channel, [to]);
  const voter = voters.get(to);
  return { text: renderTemplate(body, voter, overrides), voter };
}

/**
 * What a provider that keeps templates of its own is given: the template's ids
 * there, its language and its variables' values for this recipient, in the order they appear in the body.
 */
export function providerTemplateOf(
  template: TemplateRow | undefined,
  voter: VoterFields | undefined,
  overrides?: VariableOverrides,
): { providerTemplate?: ProviderTemplate } {
  if (!template) return {};
  const ids = providerIdsOf(template);
  if (Object.keys(ids).length === 0) return {};
  return {
    providerTemplate: {
      ids: ids as Record<string, string>,
      language: template.language,
      variables: variableValues(template.body, voter, overrides),
    },
  };
}

/** What a provider is given for a DLT-registered SMS template (TRAI): its template id and header. */
export function dltFields(template: TemplateRow | undefined) {
  if (!template || template.channel !== 'sms') return {};
  return {
    ...(template.dlt_template_id ? { dltTemplateId: template.dlt_template_id } : {}),
    ...(template.sender_id ? { senderId: template.sender_id } : {}),
  };
}

/** TRAI's limit on a DLT template's variable (`{#var#}`): at most 30 characters. */
export const DLT_VARIABLE_MAX = 30;

/**
 * The workspace's templates a templates-only channel can send through `provider` (a reply's choices, and what a
 * 422 for free text names): on a provider that keeps its own templates, those with its id there (registered or
 * approved ones first: the others are not offered); on DLT (DLT_ENFORCE), those with a DLT template id and a
 * sender id.
 */
export async function fittingTemplates(
  db: Executor,
  workspaceId: number,
  channel: MessageChannel,
  provider: string,
  dltEnforce: boolean,
): Promise<TemplateRow[]> {
  const rows = await db
    .selectFrom('templates')
    .selectAll()
    .where('workspace_id', '=', workspaceId)
    .where('channel', '=', channel)
    .orderBy('id')
    .limit(200)
    .execute();
  const keeps = adapterOf(provider)?.templates !== undefined;
  return rows.filter(
    (t) =>
      (!keeps || providerIdsOf(t)[provider] !== undefined) &&
      (!(dltEnforce && channel === 'sms') || (t.dlt_template_id !== null && t.sender_id !== null)),
  );
}

/** A DLT template's variables over TRAI's 30 characters, as 422 details (`variables.<name>`). */
export function dltVariableProblems(
  template: TemplateRow | undefined,
  variables: Readonly<Record<string, string>> | undefined,
  templatesOnly: boolean,
  errors: FieldErrors,
): void {
  if (!template || template.channel !== 'sms' || !variables) return;
  if (!templatesOnly && template.dlt_template_id === null) return;
  for (const [name, value] of Object.entries(variables)) {
    const length = [...value].length;
    if (length > DLT_VARIABLE_MAX)
      errors[`variables.${name}`] = [
        `is ${length} characters: a DLT template's variable ({#var#}) takes at most ${DLT_VARIABLE_MAX} (TRAI). Shorten it.`,
      ];
  }
}
