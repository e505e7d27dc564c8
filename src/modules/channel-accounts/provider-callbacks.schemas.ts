import { Type } from 'typebox';
import { Success } from '../../http/schemas.ts';

/** The schemas of providers' callback routes (provider-callbacks.routes.ts), for validation and the document. */

export const Params = Type.Object({
  provider: Type.String({ maxLength: 20 }),
  account: Type.String({ maxLength: 40, description: '`cha_<n>`' }),
  token: Type.String({ maxLength: 100 }),
  kind: Type.String({ maxLength: 20, description: 'delivery, call_status, greeting, webhook or inbound.' }),
});

export const DeploymentParams = Type.Object({
  provider: Type.String({ maxLength: 20 }),
  kind: Type.String({ maxLength: 20, description: 'status or inbound.' }),
});

export const common = { tags: ['Provider callbacks'], security: [] };
export const config = { permission: 'public' as const, rateLimit: 'callback' as const };
export const Applied = Success(
  Type.Object({ applied: Type.Integer({ description: 'Reports and messages taken from the request.' }) }),
);
export const Text = {
  description:
    "Text (a challenge, an IVR greeting, an empty XML or text reply), or an IVR survey's question in the JSON the provider's call flow reads.",
  content: {
    'text/plain': { schema: { type: 'string' } },
    'text/xml': { schema: { type: 'string' } },
    'application/json': { schema: { type: 'object', additionalProperties: true } },
  },
};
/** The last answer of an IVR survey, to a call flow that goes on by the status of its answer. */
export const SurveyOver = {
  description:
    "An IVR survey's last answer taken, to a call flow that moves on by the answer's status: the flow goes on to its goodbye (while questions remain the answer is 200).",
  content: { 'text/plain': { schema: { type: 'string' } } },
};
// Each provider's own fields (its call ids, a webhook's challenge, a forwarded reply's text) are its adapter's to
// read (docs/providers.md); the route bounds them only.
export const Query = Type.Object(
  {
    message: Type.Optional(
      Type.String({
        maxLength: 40,
        description: 'Our message id, where a provider is given it in the URL.',
      }),
    ),
  },
  {
    additionalProperties: Type.String({ maxLength: 5000 }),
    description: "The provider's own fields, as its documentation names them (docs/providers.md).",
  },
);
