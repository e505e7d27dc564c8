import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, SurveyResponseRow, SurveyRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { pageResult } from '../../domain.ts';
import { AppError, type FieldErrors, notFound, validationError } from '../../errors.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { adapterOf } from '../../providers/registry.ts';
import { emitMessageEvents, refund } from '../sending/lifecycle.ts';
import { failMessages } from '../sending/outbox.repository.ts';
import { queuedOfSessions } from '../messages/messages.repository.ts';
import { findAccount } from '../channel-accounts/channel-accounts.repository.ts';
import { fieldDefs } from '../voters/voter-fields.ts';
import {
  deleteKeywords,
  deleteSurvey,
  findSurvey,
  insertKeyword,
  insertSurvey,
  keywordHolder,
  surveyPage,
  updateSurvey,
} from './surveys.repository.ts';
import { answersOf, endOpenSessions, openSessionIds, responsePage } from './survey-responses.repository.ts';
import { checkDefinition, framing, type SurveyDefinition } from './surveys.rules.ts';
import { responseView, surveyView } from './surveys.view.ts';
import { parseRef, surveyRef } from '../../refs.ts';

export interface SurveyBody {
  name?: string | undefined;
  status?: 'draft' | 'active' | 'closed' | undefined;
  intro?: unknown;
  outro?: unknown;
  questions?: unknown;
  retries?: unknown;
  triggers?: unknown;
}

/** A checked definition as the surveys table keeps it. */
function stored(def: SurveyDefinition) {
  return {
    intro: JSON.stringify(framing(def.intro, def.introTemplates)),
    outro: JSON.stringify(framing(def.outro, def.outroTemplates)),
    questions: JSON.stringify(def.questions),
    retries: def.retries,
    triggers: JSON.stringify(def.triggers),
  };
}

/** Surveys (the contract's fourth part, "Surveys: ask voters on every channel"); runs are SurveyRunsService's. */
export class SurveysService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  async find(db: Executor, workspaceId: number, ref: string): Promise<SurveyRow> {
    const id = parseRef('svy', ref);
    const row = id === undefined ? undefined : await findSurvey(db, workspaceId, id);
    if (!row) throw notFound('Survey');
    return row;
  }

  private async checked(
    workspaceId: number,
    raw: SurveyBody,
    errors: FieldErrors,
  ): Promise<SurveyDefinition> {
    const def = checkDefinition(raw, await fieldDefs(this.deps.db, workspaceId), errors);
    // A missed-call trigger names an account of this workspace that carries IVR (its number takes the calls).
    for (const [i, t] of def.triggers.entries()) {
      if (!('missed_call' in t)) continue;
      const id = parseRef('cha', t.channel_account_id);
      const account = id === undefined ? undefined : await findAccount(this.deps.db, workspaceId, id);
      if (!account)
        errors[`triggers.${i}.channel_account_id`] = ['is not a channel account of this workspace.'];
      else if (!(adapterOf(account.provider)?.callbacks ?? []).includes('missed_call'))
        errors[`triggers.${i}.channel_account_id`] = [
          'must be an account whose provider reports missed calls (its callback_urls has missed_call: docs/providers.md).',
        ];
    }
    return def;
  }

  /** Keyword triggers of an active survey, kept in survey_keywords (409 when another active survey has one). */
  async syncKeywords(trx: Executor, row: SurveyRow, def: SurveyDefinition): Promise<void> {
    await deleteKeywords(trx, row.workspace_id, row.id);
    if (row.status !== 'active') return;
    const keywords = def.triggers.flatMap((t) => ('keyword' in t ? [t] : []));
    for (const t of keywords) {
      const taken = await keywordHolder(trx, row.workspace_id, t.channel, t.keyword);
      if (taken !== undefined)
        throw new AppError(
          'conflict',
          `The keyword "${t.keyword}" on ${t.channel} already starts the active survey ${surveyRef(taken)}: close that survey or choose another keyword.`,
          { keyword: t.keyword, survey_id: surveyRef(taken) },
        );
      await insertKeyword(trx, row.workspace_id, {
        channel: t.channel,
        keyword: t.keyword,
        survey_id: row.id,
      });
    }
  }

  async create(workspaceId: number, actor: AuditActor, body: SurveyBody) {
    const errors: FieldErrors = {};
    const name = typeof body.name === 'string' ? body.name.trim() : '';
    if (name === '' || name.length > 200) errors.name = ['is required, at most 200 characters.'];
    const status = body.status ?? 'draft';
    if (status === 'closed') errors.status = ['a new survey is draft or active.'];
    const def = await this.checked(workspaceId, body, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await insertSurvey(trx, {
        workspace_id: workspaceId,
        name,
        status,
        ...stored(def),
        created_by: actor.userId,
        created_at: now,
        updated_at: now,
      });
      await this.syncKeywords(trx, row, def);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'survey.created',
        target: { type: 'survey', id: surveyRef(row.id) },
        details: { name, status, questions: def.questions.length },
      });
      return surveyView(row);
    });
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { rows, total } = await surveyPage(this.deps.db, workspaceId, page, perPage);
    return pageResult(rows.map(surveyView), total, page, perPage);
  }

  async get(workspaceId: number, ref: string) {
    return surveyView(await this.find(this.deps.db, workspaceId, ref));
  }

  /**
   * Changes a survey. One that has run keeps its questions (409); any survey can be closed, which ends its open
   * sessions and stops its triggers; a closed survey stays closed.
   */
  async update(workspaceId: number, actor: AuditActor, ref: string, body: SurveyBody) {
    const current = await this.find(this.deps.db, workspaceId, ref);
    const errors: FieldErrors = {};
    if (body.name !== undefined && (body.name.trim() === '' || body.name.length > 200))
      errors.name = ['must be 1 to 200 characters.'];
    if (current.status === 'closed' && body.status !== undefined && body.status !== 'closed')
      throw new AppError(
        'conflict',
        'The survey is closed; a closed survey cannot be opened again: copy it into a new one.',
      );
    const merged: Record<string, unknown> = {
      intro: JSON.parse(current.intro),
      outro: JSON.parse(current.outro),
      questions: JSON.parse(current.questions),
      retries: current.retries,
      triggers: JSON.parse(current.triggers),
    };
    for (const key of ['intro', 'outro', 'questions', 'retries', 'triggers'] as const)
      if (body[key] !== undefined) merged[key] = body[key];
    if (
      current.has_run === 1 &&
      body.questions !== undefined &&
      JSON.stringify(body.questions) !== current.questions
    ) {
      const def = checkDefinition({ ...merged }, await fieldDefs(this.deps.db, workspaceId), {});
      if (JSON.stringify(def.questions) !== current.questions)
        throw new AppError(
          'conflict',
          'The survey has run: its questions cannot change (its results would mix two surveys). Close it and create a new one.',
        );
    }
    const def = await this.checked(workspaceId, merged, errors);
    if (Object.keys(errors).length > 0) throw validationError(errors);
    const now = nowIso();
    return this.deps.db.transaction().execute(async (trx) => {
      const row = await updateSurvey(trx, workspaceId, current.id, {
        ...(body.name !== undefined ? { name: body.name.trim() } : {}),
        ...(body.status !== undefined ? { status: body.status } : {}),
        ...stored(def),
        updated_at: now,
      });
      await this.syncKeywords(trx, row, def);
      const closing = row.status === 'closed' && current.status !== 'closed';
      if (closing) await endOpen(trx, workspaceId, { surveyId: row.id }, now);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: closing ? 'survey.closed' : 'survey.updated',
        target: { type: 'survey', id: surveyRef(row.id) },
        details: { fields: Object.keys(body), status: row.status },
      });
      return surveyView(row);
    });
  }

  /** Deletes a survey that never ran (one that ran keeps its responses: close it). */
  async remove(workspaceId: number, actor: AuditActor, ref: string) {
    const row = await this.find(this.deps.db, workspaceId, ref);
    if (row.has_run === 1)
      throw new AppError(
        'conflict',
        'The survey has run and keeps its responses: close it instead (PATCH {"status": "closed"}).',
      );
    await this.deps.db.transaction().execute(async (trx) => {
      await deleteSurvey(trx, workspaceId, row.id);
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'survey.updated',
        target: { type: 'survey', id: surveyRef(row.id) },
        details: { deleted: true },
      });
    });
  }

  /** A page of a survey's responses, newest first. */
  async responses(
    workspaceId: number,
    ref: string,
    query: {
      page: number;
      per_page: number;
      run_id?: string | undefined;
      status?: SurveyResponseRow['status'] | undefined;
    },
  ) {
    const { db } = this.deps;
    const survey = await this.find(db, workspaceId, ref);
    const runId = query.run_id !== undefined ? parseRef('srun', query.run_id) : undefined;
    if (query.run_id !== undefined && runId === undefined)
      throw validationError({ run_id: ['must be a run id such as srun_3.'] });
    const { rows, total } = await responsePage(
      db,
      workspaceId,
      survey.id,
      { runId, status: query.status },
      query.page,
      query.per_page,
    );
    const answers = await answersOf(
      db,
      workspaceId,
      rows.map((r) => r.id),
    );
    return pageResult(
      rows.map((r) => responseView(r, answers.get(r.id) ?? {})),
      total,
      query.page,
      query.per_page,
    );
  }
}

/** Ends the open sessions of a survey or run: their queued questions are failed (refunded). */
export async function endOpen(
  trx: Executor,
  workspaceId: number,
  of: { surveyId: number } | { runId: number },
  now: string,
) {
  const ids = await openSessionIds(trx, workspaceId, of);
  for (let i = 0; i < ids.length; i += 500) {
    const slice = ids.slice(i, i + 500);
    await endOpenSessions(trx, slice, now);
    const moved = await failMessages(
      trx,
      await queuedOfSessions(trx, workspaceId, slice),
      'The survey ended before this question went out.',
      'cancelled',
      now,
    );
    await refund(trx, moved, now);
    await emitMessageEvents(trx, moved, 'message.failed', now);
  }
}
