import { Type } from 'typebox';
import { Timestamp } from '../../http/schemas.ts';
import { Credits } from '../credits/credits.schemas.ts';
import { Email, Name, Password, Phone, User } from '../users/users.schemas.ts';

export const AuthResult = Type.Object(
  {
    user: User,
    access_token: Type.String({
      description: 'Send as `Authorization: Bearer <access_token>`. Shape `<id>|<secret>`.',
    }),
    token_type: Type.Literal('Bearer'),
    credits: Credits,
  },
  { title: 'AuthResult' },
);

export const RegisterBody = Type.Object(
  {
    name: Name,
    email: Email,
    password: Password,
    phone: Type.Optional(Phone),
    workspace_name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'Name of the campaign office; defaults to "<name>\'s campaign".',
      }),
    ),
  },
  { additionalProperties: false },
);

export const LoginBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { additionalProperties: false },
);

export const SendOtpBody = Type.Object({ phone: Phone }, { additionalProperties: false });

export const SendOtpResult = Type.Object(
  {
    expires_in: Type.Integer({ description: 'Seconds the code stays valid.' }),
  },
  { title: 'OtpSent' },
);

export const VerifyOtpBody = Type.Object(
  {
    phone: Phone,
    otp: Type.String({ pattern: '^[0-9]+$', minLength: 1, maxLength: 10, description: 'The 6-digit code.' }),
  },
  { additionalProperties: false },
);

export const CurrentUser = Type.Object({ user: User, credits: Credits }, { title: 'CurrentUser' });

export const ResetPasswordBody = Type.Object(
  {
    phone: Phone,
    code: Type.String({
      pattern: '^[0-9]+$',
      minLength: 1,
      maxLength: 10,
      description: 'The 6-digit code that send-otp sent.',
    }),
    password: Password,
  },
  { additionalProperties: false },
);

export const ChangePasswordBody = Type.Object(
  {
    current_password: Type.String({ minLength: 1, maxLength: 200 }),
    password: Password,
  },
  { additionalProperties: false },
);

export const AccessToken = Type.Object(
  {
    id: Type.Integer({ description: 'The part of the token before `|`.' }),
    created_at: Timestamp,
    last_used_at: Type.Union([Timestamp, Type.Null()], {
      description: 'Last request made with it, to within a minute; null if never used since sign-in.',
    }),
    expires_at: Type.Union([Timestamp, Type.Null()], {
      description: 'Null when TOKEN_TTL_SECONDS=0 (no expiry).',
    }),
    current: Type.Boolean({ description: 'true for the token that made this call.' }),
  },
  { title: 'AccessToken' },
);
