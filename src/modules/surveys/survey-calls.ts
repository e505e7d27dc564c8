import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { ChannelAccountRow, Database, SurveyResponseRow } from '../../db/schema.ts';
import type { MessageChannel } from '../../domain.ts';
import { AppError } from '../../errors.ts';
import type { CallAnswer } from '../../providers/adapter.ts';
import { channelCarrier } from '../channel-accounts/channel-accounts.service.ts';
import { recipientAddress } from '../messages/messages.rules.ts';
import { optedOutAddresses } from '../opt-outs/opt-outs.repository.ts';
import { applyAnswer, definitionOf, mayTrigger, startSession, voterByAddress } from './survey-sessions.ts';
import { textIn, type Trigger } from './surveys.rules.ts';
import { activeSurveys, surveyOf } from './surveys.repository.ts';
import { findResponse, markIvrQuestion, takeIvrQuestion } from './survey-responses.repository.ts';
import { accountMessage, bindProviderId } from '../messages/messages.repository.ts';
import { defaultLanguage } from '../workspaces/workspaces.repository.ts';
import { accountRef, parseRef } from '../../refs.ts';

/**
 * IVR surveys through the provider's call flows (the contract's fourth part; docs/providers.md shows both flows):
 * - the survey call's flow: a Gather applet whose dynamic URL is the account's `callback_urls.survey_gather` (we
 *   answer with the current question to speak or play, and how many keys to take), then a Passthru applet to
 *   `callback_urls.survey_answer` with the keys pressed (we answer whether questions remain: the flow goes back
 *   to the Gather, or on to its goodbye). The adapter renders these answers in its provider's format;
 * - the incoming flow of the account's number: a Passthru to `callback_urls.missed_call`, which starts the
 *   survey whose `missed_call` trigger names the account for the caller, on the trigger's reply channel.
 */

type Ask = Extract<CallAnswer, { kind: 'ask' }>;

export class SurveyCalls {
  constructor(private readonly deps: { db: Kysely<Database>; defaultCountry: string }) {}

  /**
   * The session a survey call belongs to: its message (our id, which the flow was given) and the call's own id, which
   * must be the call's id at the provider (bound at the first step where the hand-over had no answer). A step
   * without the call's id is refused: the message id alone is sequential, and would let anyone holding the account's
   * callback URL answer any open IVR session.
   */
  private async sessionOf(account: ChannelAccountRow, messageRef: string, callId: string | undefined) {
    const { db } = this.deps;
    if (!callId)
      throw new AppError(
        'forbidden',
        "An IVR survey step must carry the call's own id: a request without it answers nothing.",
      );
    const message = await accountMessage(db, account, parseRef('msg', messageRef), callId);
    const known =
      message &&
      message.channel === 'ivr' &&
      message.survey_response_id !== null &&
      (message.provider_message_id === null || message.provider_message_id === callId);
    if (!known)
      throw new AppError('not_found', 'No survey call of this account has that call id and message id.');
    if (
      message!.provider_message_id === null &&
      !(await bindProviderId(db, account.workspace_id, message!.id, callId))
    )
      throw new AppError('not_found', 'No survey call of this account has that call id and message id.');
    const response = await findResponse(db, account.workspace_id, message!.survey_response_id!);
    if (!response) throw new AppError('not_found', 'The survey session of this call is gone.');
    return response;
  }

  /** The Gather applet asks what to say: the current question, with its choices' keys spoken after it. */
  async gather(account: ChannelAccountRow, messageRef: string, callId: string | undefined): Promise<Ask> {
    const response = await this.sessionOf(account, messageRef, callId);
    const def = definitionOf(await surveyOf(this.deps.db, response));
    const q = def.questions[response.question];
    const lang = response.language;
    if (response.status !== 'open' || !q) {
      const text = textIn(def.outro, lang) || 'Thank you.';
      return { kind: 'ask', prompt: { text }, digits: 1, waitSeconds: 1, repeats: 0 };
    }
    // The question asked now is the one the Passthru that follows may answer, once.
    await markIvrQuestion(this.deps.db, response);
    const first = response.question === 0 && response.tries === 0 && Object.keys(def.intro).length > 0;
    const choices = (q.choices ?? []).map(
      (c) => `${textIn(c.label, lang)}: ${lang === 'hi' ? 'दबाएँ' : 'press'} ${c.key}.`,
    );
    const text = [first ? textIn(def.intro, lang) : '', textIn(q.text, lang), ...choices]
      .filter(Boolean)
      .join(' ');
    const digits =
      q.type === 'choice'
        ? Math.max(...(q.choices ?? []).map((c) => c.key.length))
        : q.type === 'number'
          ? Math.max(String(Math.trunc(Math.abs(q.max ?? 9999))).length, 1)
          : 10;
    const prompt = q.audio_url ? { audio_url: q.audio_url } : { text };
    return { kind: 'ask', prompt, digits, waitSeconds: 6, repeats: 1 };
  }

  /** The Passthru after the Gather brings the keys pressed: applied as the answer; true while questions remain. */
  async answer(
    account: ChannelAccountRow,
    messageRef: string,
    callId: string | undefined,
    digits: string,
  ): Promise<boolean> {
    const { db } = this.deps;
    const response = await this.sessionOf(account, messageRef, callId);
    if (response.status !== 'open') return false;
    const outcome = await db.transaction().execute(async (trx) => {
      // Only the question the Gather asked, once: the marker is taken in the same statement that checks it, so
      // a replayed Passthru (or one with no Gather before it) changes nothing.
      const current = await takeIvrQuestion(trx, response);
      if (!current) return 'replayed' as const;
      return applyAnswer(trx, current, digits.replace(/#$/, ''), nowIso());
    });
    if (outcome === 'replayed')
      return (await findResponse(db, response.workspace_id, response.id))?.status === 'open';
    return outcome !== 'completed';
  }

  /**
   * A missed call to the account's number: the active survey whose missed_call trigger names the account starts
   * for the caller on its reply channel (one open session per contact and channel: a second call changes nothing).
   * Returns the response, or undefined when nothing started.
   */
  async missedCall(account: ChannelAccountRow, from: string): Promise<SurveyResponseRow | undefined> {
    const { db } = this.deps;
    const surveys = await activeSurveys(db, account.workspace_id);
    const ref = accountRef(account.id);
    for (const survey of surveys) {
      const trigger = (JSON.parse(survey.triggers) as Trigger[]).find(
        (t): t is Extract<Trigger, { missed_call: true }> =>
          'missed_call' in t && t.channel_account_id === ref,
      );
      if (!trigger) continue;
      const channel = trigger.reply_channel as MessageChannel;
      const address = recipientAddress(channel, from, this.deps.defaultCountry);
      if (!address) return undefined;
      if ((await optedOutAddresses(db, account.workspace_id, channel, [address])).has(address))
        return undefined;
      // The reply goes through this account where it carries the channel, else the workspace's carrier of it.
      const own =
        (JSON.parse(account.channels) as string[]).includes(channel) && account.disabled_at === null;
      const carrier = own ? account : (await channelCarrier(db, account.workspace_id, channel)).account;
      return db.transaction().execute(async (trx) => {
        const now = nowIso();
        if (!(await mayTrigger(trx, survey, address, now))) return undefined;
        const voter = await voterByAddress(trx, account.workspace_id, channel, address);
        const opened = await startSession(trx, {
          survey,
          runId: null,
          channel,
          address,
          voterId: voter?.id ?? null,
          voterLanguage: voter?.language ?? null,
          defaultLanguage: await defaultLanguage(trx, account.workspace_id),
          accountId: carrier?.id ?? null,
          now,
        });
        return opened?.response;
      });
    }
    return undefined;
  }
}
