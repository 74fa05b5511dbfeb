/** The sample data of `switchboard demo` (see demo.ts): people, their conversations, templates. */

export type Channel = 'whatsapp' | 'messenger' | 'instagram' | 'webchat';
export const CHANNELS: Channel[] = ['whatsapp', 'messenger', 'instagram', 'webchat'];
export const DEMO_TAG = 'demo';
export const BROADCAST_NAME = 'Spring sale (demo)';
export const BROADCAST_TAG = 'newsletter';
export const BROADCAST_WAIT_MS = 120_000;

export interface SampleContact {
  key: string;
  phone: string;
  name: string;
  email: string;
  tags: string[];
  stage: 'lead' | 'customer' | 'churned' | null;
  fields: Record<string, string | number | boolean>;
}

// Phones in the 555-0100…0199 range, which the North American plan keeps for fiction.
export const CONTACTS: SampleContact[] = [
  {
    key: 'maria',
    phone: '+13125550101',
    name: 'Maria Garcia',
    email: 'maria.garcia@example.com',
    tags: ['vip'],
    stage: 'customer',
    fields: { company: 'Garcia Bakery', orders: 14 },
  },
  {
    key: 'james',
    phone: '+13125550102',
    name: 'James Okafor',
    email: 'james@okafor-logistics.example',
    tags: ['wholesale'],
    stage: 'lead',
    fields: { company: 'Okafor Logistics', source: 'website' },
  },
  {
    key: 'aiko',
    phone: '+13125550103',
    name: 'Aiko Tanaka',
    email: 'aiko.tanaka@example.com',
    tags: ['vip'],
    stage: 'customer',
    fields: { city: 'Chicago', orders: 6 },
  },
  {
    key: 'lucas',
    phone: '+13125550104',
    name: 'Lucas Silva',
    email: 'lucas.silva@example.com',
    tags: ['wholesale'],
    stage: 'customer',
    fields: { company: 'Silva & Filhos', net_terms: true },
  },
  {
    key: 'fatima',
    phone: '+13125550105',
    name: 'Fatima Zahra',
    email: 'fatima.zahra@example.com',
    tags: [BROADCAST_TAG],
    stage: 'lead',
    fields: { source: 'instagram ad' },
  },
  {
    key: 'noah',
    phone: '+13125550106',
    name: 'Noah Becker',
    email: 'noah.becker@example.com',
    tags: [],
    stage: 'churned',
    fields: { churn_reason: 'moved abroad' },
  },
  {
    key: 'priya',
    phone: '+13125550107',
    name: 'Priya Sharma',
    email: 'priya.sharma@example.com',
    tags: [BROADCAST_TAG, 'vip'],
    stage: 'customer',
    fields: { city: 'Toronto', orders: 9 },
  },
  {
    key: 'oliver',
    phone: '+13125550108',
    name: 'Oliver Smith',
    email: 'oliver.smith@example.com',
    tags: [BROADCAST_TAG],
    stage: 'lead',
    fields: { source: 'referral' },
  },
  {
    key: 'sofia',
    phone: '+13125550109',
    name: 'Sofia Rossi',
    email: 'sofia.rossi@example.com',
    tags: [BROADCAST_TAG],
    stage: 'customer',
    fields: { orders: 2 },
  },
  {
    key: 'chen',
    phone: '+13125550110',
    name: 'Chen Wei',
    email: 'chen.wei@example.com',
    tags: [BROADCAST_TAG, 'wholesale'],
    stage: 'customer',
    fields: { company: 'Lotus Tea House', net_terms: false },
  },
  {
    key: 'amara',
    phone: '+13125550111',
    name: 'Amara Nwosu',
    email: 'amara.nwosu@example.com',
    tags: [BROADCAST_TAG],
    stage: null,
    fields: {},
  },
  {
    key: 'diego',
    phone: '+13125550112',
    name: 'Diego Hernández',
    email: 'diego.hernandez@example.com',
    tags: ['returns'],
    stage: 'customer',
    fields: { orders: 3 },
  },
];

export type Step = { in: string } | { out: string } | { note: string };

export interface Script {
  contact: string;
  channel: Exclude<Channel, 'webchat'>;
  steps: Step[];
  assign?: 'agent' | 'team';
  resolve?: boolean;
}

export const SCRIPTS: Script[] = [
  {
    contact: 'maria',
    channel: 'whatsapp',
    steps: [
      { in: 'Hi! Has my order #1042 shipped yet?' },
      { out: 'Hi Maria! Yes, it left our warehouse this morning. It should be with you Thursday.' },
      { in: 'Great, thank you!' },
      { out: 'You are welcome. Enjoy the weekend!' },
    ],
    resolve: true,
  },
  {
    contact: 'james',
    channel: 'whatsapp',
    steps: [
      { in: 'Hello, do you offer wholesale prices for 200+ units a month?' },
      {
        out: 'Hi James, we do: 15% off from 100 units, 22% from 250. Shall I send the price list?',
      },
      { in: 'Yes please. Could someone also call me tomorrow morning?' },
      { note: 'Lead from the website form. Wants a call before 11am; ask about delivery days.' },
    ],
    assign: 'agent',
  },
  {
    contact: 'lucas',
    channel: 'whatsapp',
    steps: [{ in: 'Our last pallet arrived with two boxes damaged. Who can help?' }],
    assign: 'team',
  },
  {
    contact: 'aiko',
    channel: 'messenger',
    steps: [
      { in: 'Do you have the linen shirt in blue, size M?' },
      { out: 'We do, 4 left in stock. Want me to hold one for you?' },
      { in: 'Perfect, I just ordered it online.' },
      { out: 'Wonderful, it ships today. Thanks Aiko!' },
    ],
    resolve: true,
  },
  {
    contact: 'diego',
    channel: 'messenger',
    steps: [
      { in: 'I need to return the boots, they are a size too small.' },
      { note: 'Within 30 days: return approved. Label sent by email.' },
      { out: 'No problem, Diego. A free return label is on its way to your email.' },
      { in: 'Got it. Can I exchange them for a 43 instead?' },
    ],
  },
  {
    contact: 'priya',
    channel: 'instagram',
    steps: [
      { in: 'Love the new collection! Do you ship to Canada?' },
      { out: 'Thank you Priya! We do: 3–5 business days, free over $80.' },
      { in: 'Amazing 😍' },
    ],
  },
  {
    contact: 'sofia',
    channel: 'instagram',
    steps: [{ in: 'Is the 20% code from your story still valid?' }],
  },
];

/** The web chat's visitor; the phone and the rest serve only where the sandbox plays her. */
export const WEBCHAT_VISITOR: SampleContact & { steps: Step[] } = {
  key: 'emma',
  phone: '+13125550113',
  name: 'Emma Laurent',
  email: 'emma.laurent@example.com',
  tags: [],
  stage: 'lead',
  fields: { source: 'website chat' },
  steps: [
    { in: "Hi, I can't find where to change my delivery address." },
    { out: 'Hi Emma! Under Account → Addresses; the order page has an Edit link until it ships.' },
    { in: 'Found it, thanks a lot!' },
  ],
};

export const TEMPLATES = [
  {
    name: 'order_shipped',
    category: 'utility',
    body: 'Hi {{1}}, your order {{2}} has shipped.',
  },
  {
    name: 'appointment_reminder',
    category: 'utility',
    body: 'Hi {{1}}, a reminder of your appointment on {{2}}. Reply YES to confirm.',
  },
  {
    name: 'spring_sale',
    category: 'marketing',
    body: 'Our spring sale starts today: {{1}} off everything until Sunday. Reply STOP to opt out.',
  },
] as const;

export const CANNED = [
  { shortcut: 'thanks', content: 'Thank you for reaching out! Is there anything else I can do?' },
  {
    shortcut: 'shipping',
    content: 'Orders ship within one business day; delivery takes 2–4 days.',
  },
];

export const AGENT = {
  name: 'Sam Rivera',
  email: 'sam.rivera@example.com',
  role: 'agent',
} as const;
export const TEAM = 'Support';
