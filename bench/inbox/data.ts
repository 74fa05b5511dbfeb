/**
 * The inbox data set of bench/inbox/seed.ts, as pure functions of (account, index): every row is
 * computed again wherever it is needed (a message needs its conversation's times), so each table
 * is written by its own COPY with no state shared between them, and two runs write the same rows.
 */

/** A 32-bit hash (murmur3's finaliser) of any number of integers. */
function hash(...values: number[]): number {
  let h = 0x9e3779b1;
  for (const v of values) {
    h = Math.imul(h ^ (v | 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** Uniform in [0, 1), fixed by its arguments. */
export function rand(...values: number[]): number {
  return hash(...values) / 0x1_0000_0000;
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

function base32(value: number, chars: number): string {
  let out = '';
  for (let i = 0; i < chars; i++) {
    out = CROCKFORD[value % 32]! + out;
    value = Math.floor(value / 32);
  }
  return out;
}

/**
 * A prefixed ULID as `newId` makes them (its text order is its time's), whose 80 "random" bits
 * are 25 bits of hash, then `serial` (35 bits) and `sub` (20 bits): unique for every pair.
 */
export function ulidId(prefix: string, at: number, serial: number, sub = 0): string {
  return `${prefix}_${base32(at, 10)}${base32(hash(serial, sub, at) >>> 7, 5)}${base32(serial, 7)}${base32(sub, 4)}`;
}

const DAY = 86_400_000;

const FIRST_NAMES = (
  'Olivia Liam Emma Noah Ava Oliver Sophia Elijah Isabella James Mia William Amelia Benjamin ' +
  'Harper Lucas Evelyn Henry Abigail Alexander Emily Mason Ella Michael Elizabeth Ethan Camila ' +
  'Daniel Luna Jacob Sofia Logan Avery Jackson Mila Levi Aria Sebastian Scarlett Mateo Penelope ' +
  'Jack Layla Owen Chloe Theodore Victoria Aiden Madison Samuel Eleanor Joseph Grace John Nora ' +
  'David Riley Wyatt Zoey Matthew Hannah Luke Hazel Asher Lily Carter Ellie Julian Violet Grayson ' +
  'Lillian Leo Zoe Jayden Stella Gabriel Aurora Isaac Natalie Lincoln Emilia Anthony Everly Hudson ' +
  'Leah Dylan Aubrey Ezra Willow Thomas Addison Charles Lucy Christopher Audrey Jaxon Bella Maverick ' +
  'Nova Josiah Brooklyn Isaiah Paisley Andrew Savannah Elias Claire Joshua Skylar Nathan Isla Caleb ' +
  'Genesis Ryan Naomi Adrian Elena Miles Caroline Eli Eliana Nolan Anna Christian Maya Aaron Valentina ' +
  'Cameron Ruby Ezekiel Kennedy Colton Ivy Luca Ariana Landon Aaliyah Hunter Cora Jonathan Madelyn ' +
  'Santiago Alice Axel Kinsley Easton Hailey Cooper Gabriella Jeremiah Allison Angel Gianna Roman ' +
  'Serenity Connor Samantha Jameson Sarah Robert Autumn Greyson Quinn Jordan Eva Ian Piper Carson ' +
  'Sophie Jaxson Sadie Leonardo Delilah Nicholas Josephine Dominic Nevaeh Austin Adeline Everett ' +
  'Arya Brooks Emery Xavier Lydia Kai Clara Jose Vivian Parker Madeline Adam Peyton Jace Julia ' +
  'Wesley Rylee Kayden Brielle Silas Reagan Bennett Natalia Declan Jade Waylon Athena Weston ' +
  'Maria Evan Leilani Emmett Everleigh Micah Liliana Ryder Melanie Beau Mackenzie Damian Hadley'
).split(' ');

const LAST_NAMES = (
  'Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez ' +
  'Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris ' +
  'Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill ' +
  'Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Gomez Phillips ' +
  'Evans Turner Diaz Parker Cruz Edwards Collins Reyes Stewart Morris Morales Murphy Cook Rogers ' +
  'Gutierrez Ortiz Morgan Cooper Peterson Bailey Reed Kelly Howard Ramos Kim Cox Ward Richardson ' +
  'Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz Hughes Price Alvarez Castillo Sanders ' +
  'Patel Myers Long Ross Foster Jimenez Powell Jenkins Perry Russell Sullivan Bell Coleman Butler ' +
  'Henderson Barnes Gonzales Fisher Vasquez Simmons Romero Jordan Patterson Alexander Hamilton ' +
  'Graham Reynolds Griffin Wallace Moreno West Cole Hayes Bryant Herrera Gibson Ellis Tran Medina ' +
  'Aguilar Stevens Murray Ford Castro Marshall Owens Harrison Fernandez McDonald Woods Washington ' +
  'Kennedy Wells Vargas Henry Chen Freeman Webb Tucker Guzman Burns Crawford Olson Simpson Porter ' +
  'Hunter Gordon Mendez Silva Shaw Snyder Mason Dixon Munoz Hunt Hicks Holmes Palmer Wagner Black ' +
  "Robertson Boyd Rose Stone Salazar Fox Warren Mills Meyer Rice Schmidt Garza Daniels Ferguson O'Brien " +
  'Nichols Stephens Soto Weaver Ryan Gardner Payne Grant Dunn Kelley Spencer Hawkins Arnold Pierce ' +
  'Vazquez Hansen Peters Santos Hart Bradley Knight Elliott Cunningham Duncan Armstrong Hudson ' +
  'Carroll Lane Riley Andrews Alvarado Ray Delgado Berry Perkins Hoffman Johnston Matthews Pena ' +
  'Richards Contreras Willis Carpenter Lawrence Sandoval Guerrero George Chapman Rios Estrada ' +
  'Ortega Watkins Greene Nunez Wheeler Valdez Harper Burke Larson Santiago Maldonado Morrison ' +
  'Franklin Carlson Austin Dominguez Carr Lawson Jacobs Obrien Lynch Singh Vega Bishop Montgomery ' +
  'Oliver Jensen Harvey Williamson Gilbert Dean Sims Espinoza Howell Li Wong Reid Hanson Le McCoy ' +
  'Garrett Burton Fuller Wang Weber Welch Rojas Lucas Marquez Fields Park Yang Little Banks Padilla ' +
  'Day Walsh Bowman Schultz Luna Fowler Mejia Davidson Acosta Brewer May Holland Juarez Newman ' +
  'Pearson Curtis Cortez Douglas Schneider Joseph Barrett Navarro Figueroa Keller Avila Wade Molina ' +
  'Stanley Hopkins Campos Barnett Bates Chambers Caldwell Beck Lambert Miranda Byrd Craig Ayala ' +
  'Lowe Frazier Powers Neal Leonard Gregory Carrillo Sutton Fleming Rhodes Shelton Schwartz Norris ' +
  'Jennings Watts Duran Walters Cohen McDaniel Moran Parks Steele Vaughn Becker Holt Deleon Barker ' +
  'Terry Hale Leon Hail Benson Haynes Horton Miles Lyons Pham Graves Bush Thornton Wolfe Warner ' +
  'Cabrera McKinney Mann Zimmerman Dawson Lara Fletcher Page McCarthy Love Robles Cervantes Solis ' +
  'Erickson Reeves Chang Klein Salinas Fuentes Baldwin Daniel Simon Velasquez Hardy Higgins Aguirre ' +
  'Lin Cummings Chandler Sharp Barber Bowen Ochoa Dennis Robbins Liu Ramsey Francis Griffith Paul ' +
  'Blair Oconnor Cardenas Pacheco Cross Calderon Quinn Moss Swanson Chan Rivas Khan Rodgers Serrano ' +
  'Fitzgerald Rosales Stevenson Christensen Manning Gill Curry McLaughlin Harmon McGee Gross Doyle ' +
  'Garner Newton Burgess Reese Walton Blake Trujillo Adkins Brady Goodman Roman Webster Goodwin ' +
  'Fischer Huang Potter Delacruz Montoya Todd Wu Hines Mullins Castaneda Malone Cannon Tate Mack ' +
  'Sherman Hubbard Hodges Zhang Guerra Wolf Valencia Saunders Franco Rowe Gallagher Farmer Hammond ' +
  'Hampton Townsend Ingram Wise Gallegos Clarke Barton Schroeder Maxwell Waters Logan Camacho ' +
  'Strickland Norman Person Colon Parsons Frank Harrington Glover Osborne Buchanan Casey Floyd ' +
  'Patton Ibarra Ball Tyler Suarez Bowers Orozco Salas Cobb Gibbs Andrade Bauer Conner Moody Escobar'
).split(' ');

const INBOUND_TEXTS = [
  'Hi, is my order shipped?',
  'Hello! I have a question about my last invoice.',
  'Can I change the delivery address?',
  'Thanks, that worked.',
  'When will the package arrive?',
  'I would like to return an item, how do I do that?',
  'Do you have this in a larger size?',
  'The tracking link does not open for me.',
  'Great, thank you so much!',
  'Is the store open on Sunday?',
  'My payment failed twice, can you check?',
  'Can I speak to someone about a refund?',
  'ok',
  'Perfect 👍',
  'I still have not received the confirmation email.',
  'Could you send me the receipt again please?',
  'What is the warranty on this model?',
  'Yes please go ahead.',
  'Sorry, wrong chat.',
  'The discount code SPRING20 is not accepted at checkout, is it still valid?',
];

const OUTBOUND_TEXTS = [
  'Hi! Thanks for reaching out, let me check that for you.',
  'Your order has shipped and will arrive on Thursday.',
  'I have updated the delivery address on your order.',
  'You can return any item within 30 days from your account page.',
  'I have sent the receipt to your email address again.',
  'The refund has been issued; it takes 3 to 5 business days to show.',
  'Could you share your order number so I can look it up?',
  'Our store is open from 10:00 to 18:00 on Sundays.',
  'The code is valid until the end of the month; I have applied it to your order manually.',
  'Happy to help! Is there anything else I can do for you?',
  'That model comes with a two-year warranty.',
  'I am passing this to our billing team, they will get back to you today.',
];

export const TEMPLATE_NAME = 'order_shipped';
export const TEMPLATE_BODY = 'Hi {{1}}, your order {{2}} has shipped.';

const TAGS = ['vip', 'lead', 'customer', 'wholesale', 'churn-risk'];
const AREAS = [212, 213, 305, 312, 404, 415, 469, 512, 617, 646, 702, 713, 718, 773, 818, 917];

export type SeedChannel = 'whatsapp' | 'messenger' | 'instagram' | 'webchat';

/** How big an account is, and the one long conversation it has (its conversation 0). */
export interface AccountShape {
  /** 0 for the big account, 1… for the small ones. */
  index: number;
  contacts: number;
  open: number;
  /** Messages of every conversation but the long one, in all. */
  messages: number;
  longMessages: number;
  users: number;
  teams: number;
}

export const BIG: AccountShape = {
  index: 0,
  contacts: 1_000_000,
  open: 100_000,
  messages: 10_000_000 - 100_000,
  longMessages: 100_000,
  users: 50,
  teams: 8,
};

export function smallShape(index: number): AccountShape {
  return {
    index,
    contacts: 1_000,
    open: 100,
    messages: 5_000 - 200,
    longMessages: 200,
    users: 3,
    teams: 1,
  };
}

export const BIG_ACCOUNT_NAME = 'Bench inbox: 1M conversations';
/** Followed by " 01" … " 99". */
export const SMALL_ACCOUNT_PREFIX = 'Bench inbox: small';

/** The long conversation's contact: looked up by this phone (contacts_phone) by the suite. */
export const LONG_PHONE = '+14155550100';

/** Serial numbers (for ids) are unique across accounts: each account has a range of its own. */
const serialBase = (shape: AccountShape) => shape.index * 2_000_000;

export interface AccountTimes {
  /** The moment the data set ends at ("now" when it was seeded). */
  now: number;
  /** The account's creation: two years before. */
  createdAt: number;
}

export const timesOf = (now: number): AccountTimes => ({ now, createdAt: now - 730 * DAY });

export const accountIdOf = (shape: AccountShape, t: AccountTimes) =>
  ulidId('acc', t.createdAt, serialBase(shape), 1);

export const userIdOf = (shape: AccountShape, t: AccountTimes, u: number) =>
  ulidId('usr', t.createdAt + u * 60_000, serialBase(shape) + u, 2);

export const teamIdOf = (shape: AccountShape, t: AccountTimes, n: number) =>
  ulidId('team', t.createdAt + n * 60_000, serialBase(shape) + n, 3);

export const userNameOf = (shape: AccountShape, u: number) =>
  `${FIRST_NAMES[hash(shape.index, u, 1) % FIRST_NAMES.length]} ${LAST_NAMES[hash(shape.index, u, 2) % LAST_NAMES.length]}`;

/** What one conversation (and its contact, who has only this one) is. */
export interface ConversationPlan {
  i: number;
  contactId: string;
  conversationId: string;
  channel: SeedChannel;
  name: string;
  phone: string | null;
  email: string | null;
  tags: string[];
  lifecycleStage: 'lead' | 'customer' | 'churned' | null;
  /** messenger / instagram / webchat: the contact's id on that channel. */
  externalId: string | null;
  contactCreatedAt: number;
  status: 'open' | 'resolved';
  assignee: { type: 'user' | 'team'; id: string } | null;
  /** The first message's time. */
  createdAt: number;
  /** The last message's time: the conversation's last activity. */
  updatedAt: number;
  messages: number;
  lastInboundAt: number | null;
  lastReadAt: number | null;
}

/**
 * Messages per conversation: exponential around the mean, at least 1, summing to exactly
 * `shape.messages` over conversations 1… (conversation 0 is the long one).
 */
export function messageCounts(shape: AccountShape): Uint32Array {
  const n = shape.contacts;
  const counts = new Uint32Array(n);
  counts[0] = shape.longMessages;
  const mean = shape.messages / (n - 1);
  let sum = 0;
  for (let i = 1; i < n; i++) {
    const c = Math.min(400, 1 + Math.floor(-Math.log(1 - rand(shape.index, i, 11)) * (mean - 0.5)));
    counts[i] = c;
    sum += c;
  }
  // Spread the rounding difference one message at a time over the conversations.
  for (let i = 1; sum !== shape.messages; i = (i % (n - 1)) + 1) {
    if (sum < shape.messages) {
      counts[i]! += 1;
      sum++;
    } else if (counts[i]! > 1) {
      counts[i]! -= 1;
      sum--;
    }
  }
  return counts;
}

/** Contact `i`'s name: about 100,000 distinct "First Last" names, each about ten times in 1,000,000. */
export function contactNameOf(shape: AccountShape, i: number): string {
  return i === 0 ? 'Longhistory Customer' : hashedName(shape, i);
}

function hashedName(shape: AccountShape, i: number): string {
  const first = FIRST_NAMES[hash(shape.index, i, 7) % FIRST_NAMES.length]!;
  const last = LAST_NAMES[hash(shape.index, i, 8) % LAST_NAMES.length]!;
  return `${first} ${last}`;
}

function channelOf(r: number): SeedChannel {
  if (r < 0.6) return 'whatsapp';
  if (r < 0.75) return 'messenger';
  if (r < 0.9) return 'instagram';
  return 'webchat';
}

/**
 * Conversation `i` of the account. The `open` open ones are those with the most recent
 * activity but 10 % of them, which are stale (anywhere in the year); activity is spread over 12
 * months, denser lately.
 */
export function conversationPlan(
  shape: AccountShape,
  t: AccountTimes,
  counts: Uint32Array,
  i: number,
): ConversationPlan {
  const serial = serialBase(shape) + i;
  const r = (salt: number) => rand(shape.index, i, salt);
  const open = i < shape.open;
  const long = i === 0;
  // Last activity: open ones mostly within 14 days (a tenth within the year); resolved ones
  // over the year, more of them recent (the square of a uniform number leans to 0).
  let age: number;
  if (long) age = 5 * 60_000;
  else if (open) age = r(1) < 0.9 ? r(2) * r(2) * 14 * DAY : r(2) * 365 * DAY;
  else age = 14 * DAY * r(3) + r(2) * r(2) * 351 * DAY;
  const updatedAt = Math.floor(t.now - age);
  const messages = counts[i]!;
  // A conversation lasts minutes to days; the long one, a year.
  const span = long
    ? 365 * DAY
    : messages <= 1
      ? 0
      : Math.floor(((r(4) ** 3 * 3 * DAY + 60_000) * Math.min(messages, 40)) / 10);
  const createdAt = Math.max(t.createdAt + DAY, updatedAt - span);
  const contactCreatedAt = Math.max(t.createdAt, createdAt - Math.floor(r(5) * 365 * DAY));
  const channel: SeedChannel = long ? 'whatsapp' : channelOf(r(6));

  const name = contactNameOf(shape, i);
  // The email is made of the hashed names, the long conversation's contact's too.
  const [first = '', last = ''] = hashedName(shape, i).split(' ');
  const hasPhone = channel === 'whatsapp' || r(9) < 0.2;
  const phone = long
    ? LONG_PHONE
    : hasPhone
      ? `+1${AREAS[i % AREAS.length]}${200 + Math.floor(i / AREAS.length / 10_000)}${String(Math.floor(i / AREAS.length) % 10_000).padStart(4, '0')}`
      : null;
  const email =
    r(10) < 0.4
      ? `${first.toLowerCase().replace(/'/g, '')}.${last.toLowerCase().replace(/'/g, '')}${i}@example.com`
      : null;
  const tags = TAGS.filter((_, k) => r(20 + k) < 0.08);
  // A quarter leads, 15 % customers, 5 % churned, the rest without a stage.
  const stage = r(26);
  const lifecycleStage =
    stage < 0.25 ? 'lead' : stage < 0.4 ? 'customer' : stage < 0.45 ? 'churned' : null;
  const externalId =
    channel === 'messenger'
      ? String(7_000_000_000_000_000 + serial * 37)
      : channel === 'instagram'
        ? String(17_800_000_000_000_000 + serial * 41)
        : channel === 'webchat'
          ? `user-${serial}`
          : null;

  // Assignment: open ones 40 % unassigned, 45 % a user, 15 % a team; resolved ones mostly a user.
  const a = r(12);
  const toUser = open ? a >= 0.4 && a < 0.85 : a < 0.85;
  const toTeam = open ? a >= 0.85 : a >= 0.85 && a < 0.95;
  const assignee = toUser
    ? { type: 'user' as const, id: userIdOf(shape, t, hash(shape.index, i, 13) % shape.users) }
    : toTeam
      ? { type: 'team' as const, id: teamIdOf(shape, t, hash(shape.index, i, 14) % shape.teams) }
      : null;

  // The last inbound message's time; read up to the end (resolved, or 60 % of open ones) or,
  // for the others, up to some earlier message (or never).
  let lastInbound = -1;
  for (let k = messages - 1; k >= 0; k--) {
    if (directionOf(shape, i, k) === 'inbound') {
      lastInbound = k;
      break;
    }
  }
  const timeOf = (k: number) => messageTime(createdAt, updatedAt, messages, k);
  let lastReadAt: number | null;
  if (!open || r(15) < 0.6) lastReadAt = updatedAt;
  else {
    const upTo = Math.floor(r(16) * messages) - 1;
    lastReadAt = upTo < 0 ? null : timeOf(upTo);
  }
  return {
    i,
    contactId: ulidId('con', contactCreatedAt, serial),
    conversationId: ulidId('conv', createdAt, serial),
    channel,
    name,
    phone,
    email,
    tags,
    lifecycleStage,
    externalId,
    contactCreatedAt,
    status: open ? 'open' : 'resolved',
    assignee,
    createdAt,
    updatedAt,
    messages,
    lastInboundAt: lastInbound < 0 ? null : timeOf(lastInbound),
    lastReadAt,
  };
}

/** Message `k` of `n` is sent at an even step from the first to the last (the activity). */
export function messageTime(createdAt: number, updatedAt: number, n: number, k: number): number {
  return n <= 1 ? updatedAt : createdAt + Math.floor(((updatedAt - createdAt) * k) / (n - 1));
}

/** The contact writes first; then either side, a little more often the contact. */
export function directionOf(shape: AccountShape, i: number, k: number): 'inbound' | 'outbound' {
  return k === 0 || rand(shape.index, i, k, 30) < 0.52 ? 'inbound' : 'outbound';
}

export interface MessagePlan {
  id: string;
  direction: 'inbound' | 'outbound';
  type: 'text' | 'template' | 'image';
  content: string | null;
  mediaUrl: string | null;
  templateParams: string | null;
  status: 'delivered' | 'read' | 'sent' | 'failed';
  failureReason: string | null;
  providerMessageId: string | null;
  at: number;
}

export function messagePlan(
  shape: AccountShape,
  t: AccountTimes,
  c: ConversationPlan,
  k: number,
): MessagePlan {
  const at = messageTime(c.createdAt, c.updatedAt, c.messages, k);
  const direction = directionOf(shape, c.i, k);
  const r = (salt: number) => rand(shape.index, c.i, k, salt);
  const id = ulidId('msg', at, serialBase(shape) + c.i, k);
  const providerId = (): string => {
    switch (c.channel) {
      case 'whatsapp':
        return `wamid.${id.slice(4)}`;
      case 'messenger':
      case 'instagram':
        return `m_${id.slice(4)}`;
      case 'webchat':
        return `webchat_${id}`;
    }
  };
  if (direction === 'inbound') {
    return {
      id,
      direction,
      type: 'text',
      content: INBOUND_TEXTS[hash(shape.index, c.i, k, 31) % INBOUND_TEXTS.length]!,
      mediaUrl: null,
      templateParams: null,
      status: 'delivered',
      failureReason: null,
      providerMessageId: providerId(),
      at,
    };
  }
  // Outbound: 4 % WhatsApp templates, 3 % images, the rest text; read, delivered or failed.
  const kind = r(32);
  const s = r(33);
  const recent = t.now - at < 60_000;
  const status = recent ? 'sent' : s < 0.7 ? 'read' : s < 0.96 ? 'delivered' : 'failed';
  const failed = status === 'failed';
  const base = {
    id,
    direction,
    status,
    failureReason: failed ? 'The contact cannot receive messages on this channel right now.' : null,
    providerMessageId: failed ? null : providerId(),
    at,
  } as const;
  if (c.channel === 'whatsapp' && kind < 0.04) {
    const first = c.name.split(' ')[0] ?? 'there';
    const order = `#${1000 + (hash(c.i, k) % 9000)}`;
    return {
      ...base,
      type: 'template',
      content: `Hi ${first}, your order ${order} has shipped.`,
      mediaUrl: null,
      templateParams: JSON.stringify([first, order]),
    };
  }
  if (kind < 0.07) {
    return {
      ...base,
      type: 'image',
      content: null,
      mediaUrl: `https://cdn.example.com/products/${hash(c.i, k) % 5000}.jpg`,
      templateParams: null,
    };
  }
  return {
    ...base,
    type: 'text',
    content: OUTBOUND_TEXTS[hash(shape.index, c.i, k, 34) % OUTBOUND_TEXTS.length]!,
    mediaUrl: null,
    templateParams: null,
  };
}

export const TAG_NAMES = TAGS;
