import { keepPreviousData, queryOptions, useQuery } from '@tanstack/react-query';
import { allPages, api, ApiError, data, session } from './api.ts';

const ME_KEY = 'ces.me';
import type { paths } from './schema.d.ts';

/**
 * Every query the console reads, as a `queryOptions` factory: one key and one reader per resource, so that two
 * screens reading the same list share its cache, and a change made on one screen (a new template, a new time
 * zone) is seen on every other. `keys` are the roots a change invalidates: every query of a resource starts
 * with its root.
 */
export const keys = {
  me: ['me'],
  workspace: ['workspace'],
  providers: ['providers'],
  team: ['team'],
  audit: ['audit'],
  places: ['places'],
  surveys: ['surveys'],
  survey: ['survey'],
  optOuts: ['opt-outs'],
  silencePeriods: ['silence-periods'],
  templates: ['templates'],
  voterFields: ['voter-fields'],
  campaigns: ['campaigns'],
  campaign: ['campaign'],
  webhooks: ['webhooks'],
  deliveries: ['deliveries'],
  ledger: ['ledger'],
  payments: ['payments'],
  segments: ['segments'],
  channelAccounts: ['channel-accounts'],
  channelLog: ['channel-log'],
  conversations: ['conversations'],
  conversation: ['conversation'],
  quickReplies: ['quick-replies'],
  voters: ['voters'],
  voter: ['voter'],
  grievances: ['grievances'],
  grievance: ['grievance'],
  imports: ['imports'],
  importColumns: ['import-columns'],
  tagJob: ['tag-job'],
  messages: ['messages'],
  render: ['render'],
  tokens: ['tokens'],
} as const;

type Query<P extends keyof paths> = NonNullable<
  paths[P] extends { get: { parameters: { query?: infer Q } } } ? Q : never
>;

/** A custom voter field, as GET /api/voter-fields lists it. */
export type FieldDef = {
  key: string;
  label: string;
  type: 'text' | 'number' | 'date' | 'choice' | 'boolean';
  choices: string[] | null;
  sensitive: boolean;
};

export const queries = {
  /** GET /api/user: the signed-in user and their workspace's balances. The key holds the session's token. */
  me: () =>
    queryOptions({
      queryKey: [...keys.me, session.token()],
      queryFn: async () => {
        // Kept for the tab's session, so that the field screens open after a reload without the network.
        try {
          const me = await data(api.GET('/api/user'));
          sessionStorage.setItem(ME_KEY, JSON.stringify(me));
          return me;
        } catch (error) {
          const kept = sessionStorage.getItem(ME_KEY);
          if (error instanceof ApiError || !kept) throw error;
          return JSON.parse(kept) as Awaited<
            ReturnType<
              typeof data<paths['/api/user']['get']['responses'][200]['content']['application/json']['data']>
            >
          >;
        }
      },
    }),
  /** GET /api/workspace: its name, time zone and channel carriers (the token in the key: see `me`). */
  workspace: () =>
    queryOptions({
      queryKey: [...keys.workspace, session.token()],
      queryFn: () => data(api.GET('/api/workspace')),
    }),
  /** The providers an account can be of, from the service (each provider's adapter declares its fields). */
  providers: () =>
    queryOptions({
      queryKey: keys.providers,
      queryFn: () => data(api.GET('/api/channel-accounts/providers')),
      staleTime: Infinity,
    }),
  team: () =>
    queryOptions({
      queryKey: keys.team,
      queryFn: () =>
        allPages((page) => data(api.GET('/api/users', { params: { query: { page, per_page: 100 } } }))),
    }),
  audit: (page: number) =>
    queryOptions({
      queryKey: [...keys.audit, page],
      queryFn: () => data(api.GET('/api/audit-log', { params: { query: { page, per_page: 25 } } })),
      placeholderData: keepPreviousData,
    }),
  places: (kind: Query<'/api/places'>['kind'], page: number) =>
    queryOptions({
      queryKey: [...keys.places, kind, page],
      queryFn: () => data(api.GET('/api/places', { params: { query: { kind, page, per_page: 50 } } })),
      placeholderData: keepPreviousData,
    }),
  allPlaces: (kind: Query<'/api/places'>['kind']) =>
    queryOptions({
      queryKey: [...keys.places, kind, 'all'],
      queryFn: () =>
        allPages((page) =>
          data(api.GET('/api/places', { params: { query: { kind, page, per_page: 100 } } })),
        ),
    }),
  surveys: (page: number) =>
    queryOptions({
      queryKey: [...keys.surveys, page],
      queryFn: () => data(api.GET('/api/surveys', { params: { query: { page, per_page: 25 } } })),
      placeholderData: keepPreviousData,
    }),
  optOuts: (page: number) =>
    queryOptions({
      queryKey: [...keys.optOuts, page],
      queryFn: () => data(api.GET('/api/opt-outs', { params: { query: { page, per_page: 25 } } })),
      placeholderData: keepPreviousData,
    }),
  silencePeriods: () =>
    queryOptions({
      queryKey: keys.silencePeriods,
      queryFn: () =>
        allPages((page) =>
          data(api.GET('/api/silence-periods', { params: { query: { page, per_page: 100 } } })),
        ),
    }),
  /** Every template of the workspace, or of one channel. */
  templates: (channel?: 'sms' | 'whatsapp' | 'email') =>
    queryOptions({
      queryKey: channel ? [...keys.templates, channel] : keys.templates,
      queryFn: () =>
        allPages((page) =>
          data(
            api.GET('/api/templates', {
              params: { query: { page, per_page: 100, ...(channel ? { channel } : {}) } },
            }),
          ),
        ),
    }),
  segments: () =>
    queryOptions({
      queryKey: keys.segments,
      queryFn: () =>
        allPages((page) => data(api.GET('/api/segments', { params: { query: { page, per_page: 100 } } }))),
    }),
  channelAccounts: () =>
    queryOptions({
      queryKey: keys.channelAccounts,
      queryFn: () =>
        allPages((page) =>
          data(api.GET('/api/channel-accounts', { params: { query: { page, per_page: 100 } } })),
        ),
    }),
  quickReplies: () =>
    queryOptions({
      queryKey: keys.quickReplies,
      queryFn: () =>
        allPages((page) =>
          data(api.GET('/api/quick-replies', { params: { query: { page, per_page: 100 } } })),
        ),
    }),
  webhooks: () =>
    queryOptions({
      queryKey: keys.webhooks,
      queryFn: () =>
        allPages((page) => data(api.GET('/api/webhooks', { params: { query: { page, per_page: 100 } } }))),
    }),
  deliveries: (id: number) =>
    queryOptions({
      queryKey: [...keys.deliveries, id],
      queryFn: () =>
        data(api.GET('/api/webhooks/{id}/deliveries', { params: { path: { id }, query: { per_page: 25 } } })),
    }),
  ledger: (page: number) =>
    queryOptions({
      queryKey: [...keys.ledger, page],
      queryFn: () => data(api.GET('/api/credits/ledger', { params: { query: { page, per_page: 25 } } })),
      placeholderData: keepPreviousData,
    }),
  payments: () =>
    queryOptions({
      queryKey: keys.payments,
      queryFn: () => data(api.GET('/api/payments', { params: { query: { per_page: 25 } } })),
    }),
  campaigns: (page: number) =>
    queryOptions({
      queryKey: [...keys.campaigns, page],
      queryFn: () => data(api.GET('/api/campaigns', { params: { query: { page, per_page: 25 } } })),
      placeholderData: keepPreviousData,
    }),
  campaign: (id: string) =>
    queryOptions({
      queryKey: [...keys.campaign, id],
      queryFn: () => data(api.GET('/api/campaigns/{id}', { params: { path: { id } } })),
    }),
  /** The newest 50 failed messages of a campaign; `failed` (its count) in the key reads them again as it grows. */
  campaignFailed: (id: string, failed: number | undefined) =>
    queryOptions({
      queryKey: [...keys.campaign, id, 'failed', failed],
      queryFn: () =>
        data(
          api.GET('/api/campaigns/{id}/messages', {
            params: { path: { id }, query: { status: 'failed', per_page: 50 } },
          }),
        ),
    }),
  grievance: (id: number) =>
    queryOptions({
      queryKey: [...keys.grievance, id],
      queryFn: () => data(api.GET('/api/grievances/{id}', { params: { path: { id } } })),
    }),
  conversation: (id: string) =>
    queryOptions({
      queryKey: [...keys.conversation, id],
      queryFn: () => data(api.GET('/api/conversations/{id}', { params: { path: { id } } })),
    }),
  voter: (id: number) =>
    queryOptions({
      queryKey: [...keys.voter, id],
      queryFn: () => data(api.GET('/api/voters/{id}', { params: { path: { id } } })),
    }),
  survey: (id: string) =>
    queryOptions({
      queryKey: [...keys.survey, id],
      queryFn: () => data(api.GET('/api/surveys/{id}', { params: { path: { id } } })),
    }),
  /** The workspace's custom voter fields, read again on every screen that shows them (staleTime 0). */
  voterFields: () =>
    queryOptions({
      queryKey: keys.voterFields,
      queryFn: () => data(api.GET('/api/voter-fields')) as Promise<FieldDef[]>,
      staleTime: 0,
    }),
  /** A page of conversations, as the query asks (the inbox, a voter's, the dashboard's counts). */
  conversationList: (query: Query<'/api/conversations'>) =>
    queryOptions({
      queryKey: [...keys.conversations, query],
      queryFn: () => data(api.GET('/api/conversations', { params: { query } })),
    }),
  grievanceList: (query: Query<'/api/grievances'>) =>
    queryOptions({
      queryKey: [...keys.grievances, query],
      queryFn: () => data(api.GET('/api/grievances', { params: { query } })),
    }),
  voterList: (query: Query<'/api/voters'>) =>
    queryOptions({
      queryKey: [...keys.voters, query],
      queryFn: () => data(api.GET('/api/voters', { params: { query } })),
    }),
  messageHistory: (query: Query<'/api/messages/history'>) =>
    queryOptions({
      queryKey: [...keys.messages, query],
      queryFn: () => data(api.GET('/api/messages/history', { params: { query } })),
    }),
  campaignList: (query: Query<'/api/campaigns'>) =>
    queryOptions({
      queryKey: [...keys.campaigns, query],
      queryFn: () => data(api.GET('/api/campaigns', { params: { query } })),
    }),
  /** The last 24 hours' failures by error code, counted by the service (every one, not a sample). */
  failures: () =>
    queryOptions({
      queryKey: [...keys.messages, 'failures'],
      queryFn: () => data(api.GET('/api/messages/failures')),
    }),
  surveyRuns: (id: string) =>
    queryOptions({
      queryKey: [...keys.survey, id, 'runs'],
      queryFn: () =>
        data(
          api.GET('/api/surveys/{id}/runs', { params: { path: { id }, query: { page: 1, per_page: 20 } } }),
        ),
    }),
  surveyResults: (id: string, groupBy: Query<'/api/surveys/{id}/results'>['group_by'] | '') =>
    queryOptions({
      queryKey: [...keys.survey, id, 'results', groupBy],
      queryFn: () =>
        data(
          api.GET('/api/surveys/{id}/results', {
            params: { path: { id }, query: groupBy ? { group_by: groupBy } : {} },
          }),
        ),
    }),
  surveyResponses: (id: string, page: number) =>
    queryOptions({
      queryKey: [...keys.survey, id, 'responses', page],
      queryFn: () =>
        data(
          api.GET('/api/surveys/{id}/responses', { params: { path: { id }, query: { page, per_page: 25 } } }),
        ),
      placeholderData: keepPreviousData,
    }),
  tagJob: (jobId: number | null) =>
    queryOptions({
      queryKey: [...keys.tagJob, jobId],
      queryFn: () =>
        data(api.GET('/api/voters/tags/jobs/{job_id}', { params: { path: { job_id: jobId! } } })),
      enabled: jobId !== null,
    }),
  /** The newest import jobs. */
  imports: () =>
    queryOptions({
      queryKey: keys.imports,
      queryFn: () => data(api.GET('/api/voters/imports', { params: { query: { per_page: 10 } } })),
    }),
  /** The text as the service renders it (a template, or a typed body), for a voter where one is given. */
  render: (
    body: NonNullable<paths['/api/templates/render']['post']['requestBody']>['content']['application/json'],
  ) =>
    queryOptions({
      queryKey: [...keys.render, body],
      queryFn: () => data(api.POST('/api/templates/render', { body })),
    }),
  tokens: () => queryOptions({ queryKey: keys.tokens, queryFn: () => data(api.GET('/api/user/tokens')) }),
  importColumns: () =>
    queryOptions({
      queryKey: keys.importColumns,
      queryFn: () => data(api.GET('/api/voters/import/columns')),
    }),
};

/** The workspace (see queries.workspace); read only while `enabled`. */
export function useWorkspace(enabled = true) {
  return useQuery({ ...queries.workspace(), enabled });
}

/** The providers an account can be of (see queries.providers). */
export function useProviders() {
  return useQuery(queries.providers());
}
