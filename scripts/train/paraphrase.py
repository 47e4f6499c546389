#!/usr/bin/env python3
"""Meaning-preserving paraphrase of training text (stdlib only; deterministic for a given random.Random).

Why: the held-out test split of gen_decisions.py is written with wordings no training row contains: its
evidence, questions and option descriptions are paraphrases of the training ones ("Please cancel my Pro
subscription" in training, "Kindly end my Pro membership" in the test). The demo models are 5-8 M parameters and
know no English beyond their training data, so nothing tells them that "end" ~ "cancel", "membership" ~
"subscription" or "money back" ~ "refund": the first demo models learned the training wordings (0.85 on training rows)
and failed on the paraphrases (0.45 held out). Rewriting training text with synonyms from a curated table teaches
those equivalences.

What: `paraphrase(text, rng, rate)` replaces whole words and short phrases of the table below (word boundaries,
case kept: "Cancel" -> "End"), each found occurrence with probability `rate`, the replacement drawn from `rng`.
It never touches slot values: words with digits (amounts, order numbers, times), codes and identifiers (CAPS,
CamelCase, a_b, a=b, a.b, a/b, emails), capitalised words inside a sentence (names, companies, plans), and the
literal strings passed in `protect` (the names, products, places ... the generator picked). `frame_question`
wraps a question in a frame ("According to the evidence, ...?").

The table is data. Every entry was checked against the contexts the generator's templates use it in; the rule is
that a substitution never changes which option is correct, so there are no entries that add or drop a negation,
change a number, turn a comparison around (more/less, above/below, at least/at most) or touch yes/no.
  GROUPS      symmetric: any member may replace any other member.
  ONE_WAY     source -> replacements, not the reverse (the reverse would be wrong in some context).
  KEEP        phrases that are matched first and never changed (they protect a word of a group in a context
              where its synonyms are wrong: "the end of the month" is not "the cancel of the month").
  AUX         pairs used only before a further word: contractions of a pronoun and an auxiliary ("it is" <->
              "it's"; "for what it is." cannot become "for what it's."), "not yet" <-> "still not".
  SENTENCE_START  "Please"/"Kindly" at the start of a sentence: swapped or dropped; "Please " put before
              imperatives.
Guarding against wordings of the test split is the caller's job (gen_decisions.py drops a rewrite that brings one
in).
"""
import re

# ------------------------------------------------------------------------------------------- the table
GROUPS = [
    # --- generic: contractions (with a negation on both sides), modal and politeness wordings
    ("do not", "don't"), ("does not", "doesn't"), ("did not", "didn't"), ("is not", "isn't"),
    ("are not", "aren't"), ("was not", "wasn't"), ("were not", "weren't"), ("has not", "hasn't"),
    ("have not", "haven't"), ("will not", "won't"), ("cannot", "can't"), ("could not", "couldn't"),
    ("would not", "wouldn't"), ("should not", "shouldn't"),
    ("I want", "I'd like", "I would like"),
    ("could you", "can you", "would you"),
    ("we'd love", "we would love", "we'd really like"),
    ("would be great", "would be nice", "would be really useful"),
    ("has to", "needs to"),
    ("let me know", "tell me", "please tell me"),
    ("thanks", "thank you", "many thanks"),
    ("hi", "hello"),
    ("regards", "best regards", "kind regards"),
    ("I think", "I believe", "I guess"),
    ("probably", "likely", "most likely"),
    ("I don't know", "I have no idea", "I do not know"),
    ("I forgot this one", "I can't remember this one", "I don't remember this one"),
    ("anymore", "any longer"),
    ("right now", "at the moment"),
    ("as soon as", "the moment", "right when"),
    ("every time", "each time", "whenever"),
    ("also", "in addition", "on top of that", "additionally"),
    ("although", "even though"),
    ("instead of", "rather than"),
    ("initially", "at first", "in the beginning"),
    ("almost", "nearly"),
    ("very", "really", "extremely", "incredibly"),
    ("anyone", "anybody"),
    ("nobody", "no one"),
    ("someone", "somebody"),
    ("everyone", "everybody"),
    ("to others", "to other people"),
    ("in total", "altogether"),
    ("about a fifth", "roughly a fifth", "around a fifth"),
    ("twice", "two times"),
    ("whole", "entire"),
    # --- comparisons: same direction and strictness inside each group
    ("more than", "greater than", "higher than", "above", "over"),
    ("at most", "no more than", "up to", "a maximum of"),
    ("at least", "a minimum of", "no less than"),
    ("within the budget", "at or below the budget", "no higher than the budget"),
    ("within the allowed maximum", "no more than the allowed maximum", "at or below the allowed maximum"),
    ("exceed", "go over", "go beyond"),
    ("exceeds", "goes over", "goes beyond"),
    ("largest", "biggest"),
    ("bigger", "larger"),
    ("most expensive", "priciest", "costliest"),
    ("per piece", "per unit"),
    ("the maximum", "the max"),
    ("max", "maximum"),
    # --- customers, tickets, accounts, login
    ("customer", "client"),
    ("customer's", "client's"),
    ("customers", "clients"),
    ("company", "organisation", "firm"),
    ("staff", "personnel"),
    ("team", "group"),
    ("problem", "issue"),
    ("problems", "issues"),
    ("category", "kind", "type"),
    ("categorised", "classified"),
    ("classify", "categorise"),
    ("belong to", "fall under"),
    ("reporting", "describing", "raising"),
    ("urgent", "time-critical", "pressing"),
    ("priority", "urgency"),
    ("medium", "moderate"),
    ("deadline", "due date"),
    ("no time pressure", "no rush", "no hurry"),
    ("many users", "lots of users", "a large number of users"),
    ("one person", "a single person", "one individual"),
    ("several", "multiple"),
    ("affected", "impacted"),
    ("blocked", "stuck"),
    ("log in", "sign in", "log on"),
    ("logging in", "signing in"),
    ("login", "sign-in", "log-in"),
    ("get into my account", "access my account"),
    ("accessing the account", "getting into the account"),
    ("account is locked", "account is blocked"),
    ("account locked", "account blocked"),
    ("locked out", "shut out"),
    ("rejecting", "refusing"),
    ("rejected", "refused", "denied"),
    ("verification code", "security code", "one-time code"),
    ("two-factor code", "2FA code"),
    ("SMS", "text message"),
    ("changed phones", "switched phones", "got a new phone"),
    ("blocks me", "stops me"),
    ("crashes", "stops working"),
    ("freezes", "hangs", "locks up"),
    ("closes itself", "shuts itself down"),
    ("quits", "shuts down"),
    ("tap", "press", "click"),
    ("last update", "latest update", "most recent update"),
    ("throws an error", "shows an error", "gives an error"),
    ("cuts off", "leaves out", "drops"),
    ("don't match", "do not match", "differ from"),
    ("wrong", "incorrect"),
    ("what is wrong with", "what is the problem with"),
    ("future version", "later version", "future release"),
    ("add a way to", "add an option to"),
    ("save us time", "save us a lot of time"),
    ("bug", "defect", "glitch"),
    ("correctly", "properly"),
    ("functionality", "capabilities"),
    ("suggestion", "idea", "proposal"),
    ("a feature request", "a request for a feature"),
    ("website", "site", "web site"),
    ("bank app", "banking app"),
    ("payroll has to run", "payroll must run", "payroll needs to run"),
    ("starts", "begins"),
    ("does it start", "does it begin"),
    ("start time", "starting time"),
    ("see the same thing", "have the same problem", "see the same issue"),
    # --- billing, refunds, cancelling
    ("billed", "charged"),
    ("charges", "transactions"),
    ("the usual", "the regular"),
    ("price", "cost"),
    ("came to", "amounted to"),
    ("agreed to", "signed up for"),
    ("cancel", "end", "terminate", "close"),
    ("ending", "cancelling", "terminating", "closing"),
    ("cancellation", "termination"),
    ("cancelled", "called off"),
    ("stop the", "cancel the", "end the"),
    ("I'm cancelling", "I'm quitting", "I am cancelling"),
    ("don't need it anymore", "no longer need it"),
    ("refund", "reimbursement"),
    ("a refund", "a reimbursement"),
    ("issue a refund", "issue a reimbursement", "give me a refund"),
    ("refund the money", "return the money", "pay the money back", "give the money back"),
    ("refund anything", "pay anything back", "return anything"),
    ("I want a refund", "I want my money back", "I'd like a refund", "I'd like my money back",
     "I would like a refund", "I would like my money back"),
    ("don't want my money back", "don't want a refund", "do not want a refund"),
    ("asking for money back", "asking for a refund", "requesting a refund"),
    ("ask for a refund", "request a refund", "ask for their money back"),
    ("want a refund", "want a reimbursement", "want their money back"),
    ("needed", "necessary", "required"),
    ("mandatory", "compulsory", "obligatory"),
    ("fixed", "resolved"),
    ("fix it", "resolve it", "sort it out"),
    ("fix", "solution"),
    ("works fine", "works well", "is working fine"),
    ("more details", "more information", "more info"),
    ("missing information", "missing details"),
    ("for years", "for many years", "for a long time"),
    # --- orders, invoices, payments
    ("invoice", "bill"),
    ("ordered", "bought", "purchased"),
    ("pieces", "units"),
    ("item", "product"),
    ("qty", "quantity"),
    ("grand total", "overall total", "total amount"),
    ("payable by", "due by"),
    ("delivery is free", "shipping is free", "delivery costs nothing"),
    ("delivery costs", "shipping costs"),
    ("paid in full", "fully paid", "paid completely"),
    ("paid", "settled"),
    ("unpaid", "not paid"),
    ("partly", "partially"),
    ("part payment", "partial payment"),
    ("deposit", "down payment"),
    ("awaiting payment", "waiting for payment", "payment pending"),
    ("invoice is still open", "invoice is still unpaid", "invoice remains unpaid"),
    ("the rest is open", "the rest is outstanding", "the remainder is unpaid"),
    ("payment status", "status of payment"),
    ("owe", "have to pay"),
    ("amount", "sum"),
    ("order number", "order ID", "order reference"),
    ("thanks for your order", "thank you for your order", "thanks for ordering"),
    # --- access requests and policies
    ("approval", "sign-off", "authorisation"),
    ("written approval", "approval in writing"),
    ("need written approval", "require written approval"),
    ("manager", "supervisor", "line manager"),
    ("approve", "grant", "allow"),
    ("approved", "granted", "allowed"),
    ("deny", "reject", "refuse"),
    ("break", "violate"),
    ("breaks", "violates"),
    ("no rule is broken", "no rule is violated"),
    ("rule is violated", "rule is broken"),
    ("comply with", "conform to"),
    ("complies", "conforms"),
    ("under the policy", "according to the policy", "in line with the policy"),
    ("admin", "administrator"),
    ("rights", "privileges", "permissions"),
    ("permission level", "access level"),
    ("read-only", "view-only", "read only"),
    ("read and write", "read-write"),
    ("duration", "length"),
    ("access period", "access window", "period of access"),
    ("capped at", "limited to"),
    ("completed", "finished"),
    ("not started", "not begun"),
    ("pending", "outstanding"),
    ("security training", "security course"),
    ("missing", "absent"),
    ("right", "correct"),
    ("misses", "lacks"),
    ("not met", "unmet"),
    ("meet", "satisfy", "fulfil"),
    ("meets", "satisfies", "fulfils"),
    ("respect", "stay within"),
    ("asked for", "requested"),
    ("asking for", "requesting"),
    # --- product reviews
    ("excellent", "great", "superb"),
    ("awful", "terrible", "dreadful"),
    ("dies", "runs flat", "goes flat"),
    ("expensive", "pricey", "costly"),
    ("overpriced", "too expensive"),
    ("fair", "reasonable"),
    ("bargain", "steal", "great deal"),
    ("quick", "fast", "speedy"),
    ("took forever", "took ages", "was very slow"),
    ("well packed", "well packaged"),
    ("solid", "sturdy", "robust"),
    ("well made", "well built"),
    ("build quality", "construction quality"),
    ("snapped", "broke"),
    ("flimsy", "fragile"),
    ("came apart", "split open", "fell apart"),
    ("silently", "quietly", "without a sound"),
    ("loud", "noisy"),
    ("unbearable", "intolerable"),
    ("constantly", "all the time", "nonstop"),
    ("perfectly", "nicely"),
    ("photos", "pictures", "images"),
    ("answered", "replied", "responded"),
    ("replied to", "responded to"),
    ("helpdesk", "help desk", "support desk"),
    ("helpline", "support line", "hotline"),
    ("rude", "impolite"),
    ("happy", "pleased", "satisfied"),
    ("unhappy", "dissatisfied", "displeased"),
    ("positive", "favourable"),
    ("praise", "compliments"),
    ("ordinary", "average", "regular"),
    ("remarkable", "special"),
    ("disappointed", "let down"),
    ("highly recommended", "strongly recommended"),
    ("sending it back", "returning it"),
    ("send it back", "return it", "give it back"),
    ("return the product", "send the product back", "take the product back"),
    ("returned", "sent back"),
    ("stated", "mentioned"),
    ("intention", "intent"),
    ("intend to", "plan to", "mean to"),
    ("overall sentiment", "general sentiment", "overall tone"),
    ("complain about", "criticise", "object to"),
    ("criticised", "complained about"),
    ("main complaint", "chief complaint", "biggest complaint"),
    ("rating", "score"),
    ("reviewer", "author", "writer"),
    # --- sensor readings
    ("location", "place"),
    ("locations", "places"),
    ("measured", "recorded", "registered"),
    ("alarm", "alert"),
    ("threshold", "limit"),
    ("the allowed maximum", "the limit", "the permitted maximum"),
    ("failed to report", "did not report", "sent no data"),
    # --- scheduling
    ("booked", "scheduled", "planned"),
    ("booking", "reservation"),
    ("has moved to", "has been moved to", "has been rescheduled to"),
    ("moved", "rescheduled"),
    ("released", "freed up"),
    ("the new slot", "the new time slot", "the new time"),
    ("attend", "join", "take part", "participate"),
    ("attending", "participating"),
    ("not attending", "not participating"),
    ("cannot make it", "can't make it", "is unable to come"),
    ("no reply", "no answer", "no response"),
    ("take place", "happen"),
    ("meeting", "session"),
    ("first booked", "originally booked", "originally planned"),
    ("going ahead", "still happening"),
    # --- job applications
    ("candidate", "applicant"),
    ("candidate's", "applicant's"),
    ("opening", "vacancy"),
    ("role", "position"),
    ("hiring", "recruiting"),
    ("requirements", "criteria"),
    ("requirement", "criterion"),
    ("lives in", "resides in"),
    ("based in", "located in"),
    ("lists", "mentions"),
    ("list", "mention"),
    ("skills", "abilities"),
    ("knows", "is familiar with"),
    ("this field", "this area", "this line of work"),
    ("relocate", "move"),
    ("willing to", "prepared to", "ready to"),
    ("per year", "a year", "annually", "per annum"),
    ("salary expectation", "expected salary"),
    ("experienced enough", "sufficiently experienced"),
    ("similar role", "comparable role"),
    ("falls short on", "is lacking on"),
    ("fully qualified", "completely qualified"),
    # --- incidents
    ("configuration", "config"),
    ("bad configuration", "faulty configuration"),
    ("pushed", "deployed", "rolled out"),
    ("a failed disk", "a faulty disk", "a broken disk"),
    ("disk", "drive"),
    ("failure", "fault"),
    ("outage", "downtime"),
    ("release", "version"),
    ("introduced", "added"),
    ("exhausted", "used up", "depleted"),
    ("by mistake", "accidentally", "in error"),
    ("accidental", "unintended"),
    ("checked", "inspected", "examined"),
    ("unrelated", "not related"),
    ("found", "detected", "identified"),
    ("saw errors", "got errors", "hit errors"),
    ("region", "area"),
    ("did not notice anything", "noticed nothing"),
    ("ongoing", "in progress", "continuing"),
    ("permanent", "lasting", "final"),
    ("workaround", "temporary fix", "stopgap"),
    ("mitigated", "contained"),
    ("the issue is still open", "the issue remains open"),
    ("caused by", "due to", "the result of"),
    ("root cause", "underlying cause"),
    ("cause", "reason"),
    ("human error", "human mistake"),
    ("operator error", "operator mistake"),
    ("config error", "configuration mistake"),
    ("lack of capacity", "shortage of capacity", "insufficient capacity"),
    ("too much load", "excessive load"),
    ("severe", "serious"),
    ("engineers are still working on it", "engineers are still on it", "work on it continues"),
    # --- answer grading
    ("graded", "marked", "scored"),
    ("grade", "mark"),
    ("student", "pupil"),
    ("student's", "pupil's"),
    ("reference answer", "model answer", "expected answer"),
    # --- documents
    ("contract", "agreement"),
    ("notification", "notice"),
    ("advertisement", "ad", "advert"),
    ("instructions", "directions", "steps"),
    ("internal", "in-house"),
    ("memo", "memorandum"),
    ("shop", "store"),
    ("looking for", "seeking", "searching for"),
    ("announced", "revealed"),
    ("launches", "introduces", "unveils"),
    # --- parcels and shipments
    ("parcel", "package"),
    ("supposed to arrive", "supposed to be delivered", "due to arrive"),
    ("arrive", "come"),
    ("arrives", "comes"),
    ("arrived", "came"),
    ("still hasn't come", "still hasn't arrived", "still has not arrived"),
    ("days late", "days overdue"),
    ("weeks late", "weeks overdue"),
    ("a late", "a delayed"),
    ("tracking hasn't moved", "tracking hasn't changed", "tracking has not updated"),
    ("in transit", "on its way", "en route"),
    ("broken", "damaged"),
    ("crushed", "smashed", "squashed"),
    ("torn", "ripped"),
    ("doesn't turn on", "won't turn on", "does not switch on"),
    ("the box", "the packaging"),
    ("picked up", "collected"),
    ("departed", "left"),
    ("hub", "depot", "sorting facility"),
    ("recipient", "addressee"),
    ("sender", "shipper"),
    ("initiated", "started"),
    ("on hold", "held up"),
    ("latest", "most recent", "newest"),
    ("events", "entries"),
    ("event", "entry"),
    ("are listed", "are shown"),
    ("get", "receive"),
    ("after the promised date", "later than the promised date", "past the promised date"),
    ("dispatched", "shipped", "sent out"),
]

ONE_WAY = {
    "ticket": ("request", "case"),
    "tickets": ("requests", "cases"),
    "subscription": ("membership", "plan"),
    "membership": ("subscription",),
    "cracked": ("broken",),
    "shipping": ("delivery",),
    "salary": ("pay", "wage"),
    "sign off": ("approve", "give approval"),
    "ask for": ("request",),
    "asks for": ("requests", "wants"),
    "longer than": ("more than", "over"),
    "highest": ("maximum",),
    "lowest": ("minimum",),
    "mistake": ("error",),
    "healthy": ("fine", "working normally"),
    "reading": ("measurement", "value"),
    "readings": ("measurements", "values"),
    "measurement": ("reading",),
    "measurements": ("readings",),
    "have to": ("must",),
    "affect": ("impact",),
    "app": ("application",),
    "current": ("present",),
    "expects": ("wants",),
    "pcs": ("pieces", "units"),
    "every": ("each",),
    "named": ("mentioned",),
    "sorted": ("fixed", "resolved"),
    "done": ("completed", "finished"),
    "I've": ("I have",),
    "we've": ("we have",),
    "link": ("connection",),
}

KEEP = [
    "the end of", "end of", "more than one", "customer service", "customer support", "tax invoice", "bill to",
    "closing date", "takes place", "in place", "just right", "arrived at", "arrive at", "address not found",
    "not found", "opening of", "no idea", "line item", "longer than allowed", "allowed maximum",
    "maximum allowed", "half right", "press release", "happy to", "most recent call", "fully correct",
    "shipping or delivery",
]

# only where a further word follows: pronoun + auxiliary, contracted and long ("for what it is." stays), and
# "not yet" ("Payment not yet received", but not "Manager approval: not yet.")
AUX = [("not yet", "still not"), ("it is", "it's"), ("I am", "I'm"), ("I would", "I'd"), ("we are", "we're"),
       ("we would", "we'd"), ("that is", "that's"), ("there is", "there's"), ("you are", "you're"), ("I will", "I'll")]

# "Please X" / "Kindly X" at the start of a sentence: swapped or dropped; "Please " before these imperatives
SENTENCE_START = ("Please", "Kindly")
IMPERATIVES = {"refund", "cancel", "stop", "consider", "let", "classify", "rate", "count", "decide", "grade",
               "assign", "name", "send"}

# question frames: the question after a prefix starts lower-case; a suffix replaces the final "?"
QUESTION_PREFIXES = ["According to the evidence, ", "According to the text, ", "Based on the evidence, ",
                     "Based on the text, ", "From what is written, ", "Going by the text, ",
                     "Judging from the evidence, ", "Looking at the text, ", "Given the evidence, ",
                     "In the text above, "]
QUESTION_SUFFIXES = [", according to the evidence?", ", according to the text?", ", based on the text?",
                     ", going by the evidence?", ", judging from the text?"]
INSTRUCTION_PREFIXES = ["Based on the evidence, ", "Using the text, ", "From the evidence, ", "Going by the text, "]
QUESTION_WORDS = {"what", "which", "how", "is", "are", "does", "do", "did", "has", "have", "was", "were",
                  "will", "would", "should", "can", "could", "where", "when", "why", "who", "in", "on", "at"}

# ------------------------------------------------------------------------------------------- the engine
_WORD = re.compile(r"[A-Za-z]+(?:['\u2019-][A-Za-z]+)*")
_SENTENCE_END = ".!?:;\"'(]\n-|=*\u2013"
_I_WORDS = {"I", "I'm", "I'd", "I've", "I'll"}


def _key(phrase):
    return tuple(w.lower() for w in _WORD.findall(phrase))


def _build():
    """phrase (tuple of lower-case words) -> (replacements, needs a following word); KEEP phrases have none."""
    table = {}

    def add(src, alts, aux=False):
        k = _key(src)
        if k in table:
            raise ValueError("phrase %r is in two entries" % src)
        table[k] = (tuple(alts), aux)

    for g in GROUPS:
        for p in g:
            add(p, [q for q in g if q != p])
    for src, alts in ONE_WAY.items():
        add(src, alts)
    for long, short in AUX:
        add(long, [short], True)
        add(short, [long], True)
    for k in KEEP:
        add(k, [])
    caps = {p for g in GROUPS for p in g if len(p) > 1 and p.isupper()}
    by_first = {}  # first word -> the phrase lengths starting with it, longest first
    for k in table:
        by_first.setdefault(k[0], set()).add(len(k))
    return table, caps, {w: sorted(ns, reverse=True) for w, ns in by_first.items()}


_TABLE, _CAPS, _LENGTHS = _build()


def _sentence_start(text, pos):
    i = pos - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END


_CODE = re.compile(r"\d|[@/=_#*\\|<>{}\[\]]|[A-Za-z][.:][A-Za-z]|[a-z][A-Z]")   # digits, paths, a.b, CamelCase
_CAPS_WORD = re.compile(r"\b[A-Z][A-Z]+\b")


def _protected(text, a, b, slots):
    """Whether text[a:b] touches a slot value: a word with digits, a code or identifier (CAPS, CamelCase, a_b,
    a=b, a.b, a/b, an email), or one of the slots ((start, end) spans of the protected strings)."""
    lo = max(text.rfind(" ", 0, a), text.rfind("\n", 0, a), text.rfind("\t", 0, a)) + 1
    hi = min([j for j in (text.find(" ", b), text.find("\n", b), text.find("\t", b)) if j >= 0] or [len(text)])
    region = text[lo:hi]
    if _CODE.search(region) or any(m.group() not in _CAPS for m in _CAPS_WORD.finditer(region)):
        return True
    return any(s < b and a < e for s, e in slots)


def _an(word):
    w = word.lower()
    if w.startswith(("unit", "uniq", "unif", "union", "univ", "use", "usu", "eu", "one")):
        return False
    return w[:1] in "aeiou" or w.startswith(("hour", "honest"))


def _replace(src, rep):
    """rep with the capital of src ("Cancel" -> "End"); a replacement written with capitals keeps them."""
    if src[0].isupper() and src not in _CAPS:
        return rep[0].upper() + rep[1:]
    return rep


_MEMO = {}


def _candidates(text, protect):
    """The table phrases found in text, longest first from left to right, as (start, end, replacements):
    without KEEP phrases, protected characters, and contractions of AUX that no word follows. Memoised: the
    generator's questions and options repeat."""
    low = text.lower()
    key = (text, tuple(p.lower() for p in protect if p and p.lower() in low))
    found = _MEMO.get(key)
    if found is not None:
        return found
    words = [(m.start(), m.end(), m.group(), low[m.start():m.end()]) for m in _WORD.finditer(text)]
    slots = None
    found, i, n = [], 0, len(words)
    while i < n:
        hit = None
        for k in _LENGTHS.get(words[i][3], ()):
            if i + k > n:
                continue
            seg = words[i:i + k]
            entry = _TABLE.get(tuple(w[3] for w in seg)) if k > 1 else _TABLE.get((seg[0][3],))
            if entry is None or any(text[seg[j][1]:seg[j + 1][0]] != " " for j in range(k - 1)):
                continue
            a, b = seg[0][0], seg[-1][1]
            if entry[0]:  # a replaceable phrase (a KEEP phrase holds even over protected words)
                if slots is None:
                    slots = [(m.start(), m.end()) for p in key[1] for m in re.finditer(re.escape(p), low)]
                if _protected(text, a, b, slots):
                    continue
                if any(w[2][0].isupper() and w[2] not in _I_WORDS and w[2] not in _CAPS
                       and not _sentence_start(text, w[0]) for w in seg):
                    continue  # capitalised inside a sentence: a name, a company, a plan
            hit = (k, a, b, entry)
            break
        if hit is None:
            i += 1
            continue
        k, a, b, (alts, aux) = hit
        i += k
        if alts and not (aux and not re.match(r" [A-Za-z]", text[b:b + 2])):
            found.append((a, b, alts))
    if len(_MEMO) > 100000:
        _MEMO.clear()
    _MEMO[key] = found = tuple(found)
    return found


def paraphrase(text, rng, rate, protect=(), please=True):
    """`text` with words and phrases of the table replaced by synonyms, each occurrence found with probability
    `rate`; draws from `rng` (a random.Random). `protect`: literal strings (slot values) left as they are.
    please: also swap, drop or add a sentence-initial "Please" (evidence and questions, not option texts)."""
    out, last = [], 0
    for a, b, alts in _candidates(text, protect):
        if rng.random() >= rate:
            continue
        rep = _replace(text[a:b], rng.choice(alts))
        head = text[last:a]
        m = re.search(r"\b([Aa]n?) $", head)
        if m:  # a / an before the new word
            art = "an" if _an(rep) else "a"
            head = head[:m.start(1)] + (art.capitalize() if m.group(1)[0] == "A" else art) + " "
        out += [head, rep]
        last = b
    out.append(text[last:])
    text = "".join(out)
    return _please(text, rng, rate) if please else text


_START = re.compile(r"(^|[.!?]\s+|\n)(Please|Kindly|[A-Z][a-z]+)( )([a-z])")


def _please(text, rng, rate):
    """Sentence-initial "Please"/"Kindly": swapped or dropped (rate); "Please " put before an imperative (rate/3)."""
    def sub(m):
        lead, w, sp, nxt = m.groups()
        if w in SENTENCE_START:
            if rng.random() >= rate:
                return m.group(0)
            alt = rng.choice([x for x in SENTENCE_START if x != w] + [""])
            return lead + (alt + sp + nxt if alt else nxt.upper())
        if w.lower() in IMPERATIVES and rng.random() < rate / 3:
            return lead + "Please " + w.lower() + sp + nxt
        return m.group(0)
    return _START.sub(sub, text)


def frame_question(q, rng):
    """The question inside a frame that says where the answer comes from ("According to the text, what ...?",
    "What ..., based on the text?"); None if the question does not start with a question word or imperative."""
    m = re.match(r"([A-Z][a-z]*)[ ,]", q)
    if not m:
        return None
    w = m.group(1)
    rest = w.lower() + q[len(w):]
    if q.endswith("?") and w.lower() in QUESTION_WORDS:
        if rng.random() < 0.6:
            return rng.choice(QUESTION_PREFIXES) + rest
        return q[:-1] + rng.choice(QUESTION_SUFFIXES)
    if q.endswith(".") and w.lower() in IMPERATIVES:
        return rng.choice(INSTRUCTION_PREFIXES) + rest
    return None
