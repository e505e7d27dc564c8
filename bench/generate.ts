import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { once } from 'node:events';

/**
 * A realistic voter roll as CSV: Indian names in Latin and Devanagari, +91 mobiles (unique), some emails,
 * constituencies, booths, wards and addresses (with commas, so quoted). Deterministic for a given count.
 */

const latinFirst = [
  'Aarav',
  'Vivaan',
  'Aditya',
  'Vihaan',
  'Arjun',
  'Sai',
  'Reyansh',
  'Ayaan',
  'Krishna',
  'Ishaan',
  'Rahul',
  'Amit',
  'Suresh',
  'Ramesh',
  'Mahesh',
  'Rajesh',
  'Sanjay',
  'Vijay',
  'Anil',
  'Sunil',
  'Priya',
  'Ananya',
  'Diya',
  'Saanvi',
  'Aadhya',
  'Pooja',
  'Neha',
  'Sunita',
  'Anita',
  'Kavita',
  'Meena',
  'Lakshmi',
  'Geeta',
  'Rekha',
  'Shanti',
  'Farhan',
  'Imran',
  'Ayesha',
  'Fatima',
  'Zoya',
  'Harpreet',
  'Gurpreet',
  'Manpreet',
  'Joseph',
  'Mary',
  'Thomas',
  'Arun',
  'Deepak',
  'Manoj',
  'Kiran',
];
const latinLast = [
  'Sharma',
  'Verma',
  'Gupta',
  'Singh',
  'Kumar',
  'Yadav',
  'Patel',
  'Shah',
  'Reddy',
  'Rao',
  'Nair',
  'Iyer',
  'Menon',
  'Das',
  'Bose',
  'Chatterjee',
  'Mukherjee',
  'Khan',
  'Ansari',
  'Qureshi',
  'Sheikh',
  'Gill',
  'Sandhu',
  'Joshi',
  'Mishra',
  'Pandey',
  'Tiwari',
  'Dubey',
  'Chauhan',
  'Rathore',
  'Jain',
  'Agarwal',
  'Mehta',
  'Desai',
  'Pillai',
  'Thakur',
  'Kapoor',
  'Malhotra',
  'Saxena',
  'Srivastava',
];
const devFirst = [
  'आरव',
  'विवान',
  'आदित्य',
  'अर्जुन',
  'कृष्णा',
  'राहुल',
  'अमित',
  'सुरेश',
  'रमेश',
  'महेश',
  'राजेश',
  'संजय',
  'विजय',
  'अनिल',
  'सुनील',
  'प्रिया',
  'अनन्या',
  'पूजा',
  'नेहा',
  'सुनीता',
  'अनीता',
  'कविता',
  'मीना',
  'लक्ष्मी',
  'गीता',
  'रेखा',
  'शांति',
  'दीपक',
  'मनोज',
  'किरण',
];
const devLast = [
  'शर्मा',
  'वर्मा',
  'गुप्ता',
  'सिंह',
  'कुमार',
  'यादव',
  'पटेल',
  'मिश्रा',
  'पांडे',
  'तिवारी',
  'दुबे',
  'चौहान',
  'जोशी',
  'श्रीवास्तव',
  'सक्सेना',
  'ठाकुर',
  'जैन',
  'अग्रवाल',
  'राठौर',
  'त्रिपाठी',
];
const constituencies = [
  'Varanasi',
  'Lucknow',
  'Kanpur',
  'Allahabad',
  'Gorakhpur',
  'Agra',
  'Meerut',
  'Bareilly',
  'Aligarh',
  'Moradabad',
  'Patna',
  'Gaya',
  'Bhagalpur',
  'Muzaffarpur',
  'Jaipur',
  'Jodhpur',
  'Udaipur',
  'Kota',
  'Bikaner',
  'Ajmer',
  'Bhopal',
  'Indore',
  'Gwalior',
  'Jabalpur',
  'Ujjain',
  'Ahmedabad',
  'Surat',
  'Vadodara',
  'Rajkot',
  'Mumbai North',
  'Mumbai South',
  'Pune',
  'Nagpur',
  'Nashik',
  'Thane',
  'Chennai Central',
  'Madurai',
  'Coimbatore',
  'Bangalore North',
  'Bangalore South',
  'Mysore',
  'Hyderabad',
  'Secunderabad',
  'Warangal',
  'Kolkata North',
  'Kolkata South',
  'Howrah',
  'Bhubaneswar',
  'Cuttack',
  'Guwahati',
  'Shillong',
  'Ranchi',
  'Jamshedpur',
  'Dehradun',
  'Haridwar',
  'Shimla',
  'Amritsar',
  'Ludhiana',
  'Chandigarh',
  'New Delhi',
  'East Delhi',
  'Chandni Chowk',
  'Thiruvananthapuram',
  'Kochi',
  'Kozhikode',
  'Panaji',
  'Raipur',
  'Bilaspur',
  'Jammu',
  'Srinagar',
  'वाराणसी',
  'लखनऊ',
  'पटना',
  'जयपुर',
  'भोपाल',
];
/** How many constituencies the plain roll (no StateShape) spreads its voters over. */
export const plainConstituencies = constituencies.length;
const streets = [
  'MG Road',
  'Station Road',
  'Gandhi Nagar',
  'Nehru Colony',
  'Civil Lines',
  'Sadar Bazaar',
  'Ram Nagar',
  'Shastri Nagar',
  'गांधी मार्ग',
  'नेहरू नगर',
];
const domains = ['gmail.com', 'yahoo.co.in', 'rediffmail.com', 'outlook.com', 'example.in'];

/** A small deterministic PRNG (mulberry32). */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

/** A state's roll (bench/state.ts): `constituencies` names in all, the first holding `firstShare` of the voters. */
export interface StateShape {
  constituencies: number;
  firstShare: number;
}

/** The k-th constituency of a state: the list's names, then the same with a number ("Varanasi 2"). */
export function constituencyName(k: number): string {
  const base = constituencies[k % constituencies.length] as string;
  const round = Math.floor(k / constituencies.length);
  return round === 0 ? base : `${base} ${round + 1}`;
}

/** `i * a mod m` without leaving the integers a double holds exactly (i up to 2^31, a and m below 2^32). */
function mulMod(i: number, a: number, m: number): number {
  const hi = Math.floor(a / 65536);
  const lo = a % 65536;
  return (((((i * hi) % m) * 65536) % m) + ((i * lo) % m)) % m;
}

/**
 * The poll bench:surveys and bench:state ask (answers to the first two are written in SQL as the service keeps
 * them).
 */
export const benchPoll = {
  name: 'Bench poll',
  questions: [
    {
      key: 'vote',
      type: 'choice',
      text: { en: 'Will you vote for us?' },
      choices: [
        { key: '1', label: { en: 'Yes' } },
        { key: '2', label: { en: 'No' } },
        { key: '3', label: { en: 'Undecided' } },
      ],
    },
    { key: 'household', type: 'number', text: { en: 'Voters in your house?' }, min: 1, max: 30 },
    { key: 'problem', type: 'text', text: { en: 'Biggest problem?' } },
  ],
};

export async function generateVotersCsv(path: string, count: number, state?: StateShape): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const out = createWriteStream(path);
  const random = rng(20261121);
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)] as T;
  out.write('name,phone,email,constituency,booth,ward,address\n');
  let chunk: string[] = [];
  for (let i = 0; i < count; i++) {
    const devanagari = random() < 0.3;
    const first = devanagari ? pick(devFirst) : pick(latinFirst);
    const last = devanagari ? pick(devLast) : pick(latinLast);
    const name = `${first} ${last}`;
    // A permutation of 0..3e9 keeps every mobile unique while spreading the digits.
    const phone = `+91${6_000_000_000 + mulMod(i, 2654435761, 3_000_000_000)}`;
    const email =
      !devanagari && random() < 0.5 ? `${first}.${last}${i % 997}@${pick(domains)}`.toLowerCase() : '';
    const constituency = !state
      ? pick(constituencies)
      : random() < state.firstShare
        ? constituencyName(0)
        : constituencyName(1 + Math.floor(random() * (state.constituencies - 1)));
    const booth = String(1 + Math.floor(random() * 300));
    const ward = String(1 + Math.floor(random() * 60));
    const address = `H.No ${1 + Math.floor(random() * 999)}, ${pick(streets)}, ${constituency}`;
    chunk.push([name, phone, email, constituency, booth, ward, address].map(csvField).join(','));
    if (chunk.length === 10_000) {
      if (!out.write(chunk.join('\n') + '\n')) await once(out, 'drain');
      chunk = [];
    }
  }
  if (chunk.length) out.write(chunk.join('\n') + '\n');
  out.end();
  await once(out, 'finish');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const count = Number(process.argv[3] ?? 1_000_000);
  const path = process.argv[2] ?? 'bench/out/voters.csv';
  const started = performance.now();
  await generateVotersCsv(path, count);
  console.log(`wrote ${count} voters to ${path} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
