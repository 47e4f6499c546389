#!/usr/bin/env python3
"""Generator of typed-decision data for the demo models (stdlib only; deterministic for a seed).

Each row is a fixture row of typedecide: {"id", "family", "evidence", "question", "options": [{"id",
"description"}], "answer"}. Rows come in evidence groups (1-4 questions over one evidence, on consecutive
lines), as `decide` and `evaluate` use them.

Generalisation, not memory: every list of wordings (evidence templates, phrases inside them, questions, option
descriptions) is split by position: items 3, 7, 11, ... (every fourth; the last one of a list of 2-3) belong to
the test split only, the others to the train split only. Names, companies, products, places, systems and every
number >= 10 are split by a hash of their text (a quarter test-only). So a test row is written with wordings,
names and values that no training row contains.

Families (base models): ticket_triage, order_invoice, access_request, product_review, sensor_readings,
scheduling, job_application, incident_report, answer_grading, doc_labeling. The adapter family
shipment_tracking is never used to train the base models.

Paraphrase augmentation (train split only; --no-paraphrase turns it off): a tiny model knows no English beyond
this data, so it cannot tell that a test wording ("Kindly end my Pro membership") means what a training wording
("Please cancel my Pro subscription") means. paraphrase.py rewrites training evidence, questions and option
descriptions with synonyms (and frames some questions). A rewrite that brings in a test-only wording (a literal
piece of >= 12 characters of a test-only variant, a short variant of two or more words, the pattern of a variant
with slots, or a whole short one; see Guard) is dropped for the original text. The test split is not touched: its
output is byte-identical with or without this.

    python3 scripts/train/gen_decisions.py --split test --groups 110 --seed 15 --out fixtures/eval/heldout.jsonl
    python3 scripts/train/gen_decisions.py --split train --groups 400000 --seed 1 --out train.jsonl --workers 16
"""
import argparse
import json
import os
import random
import re
import sys
import zlib

try:
    from paraphrase import frame_question, paraphrase
except ImportError:  # the test split does not need it; the train split says so (see generate)
    paraphrase = frame_question = None

BASE_FAMILIES = ["ticket_triage", "order_invoice", "access_request", "product_review", "sensor_readings",
                 "scheduling", "job_application", "incident_report", "answer_grading", "doc_labeling"]
ADAPTER_FAMILY = "shipment_tracking"


def _is_test_item(s):
    return zlib.crc32(s.encode("utf-8")) % 4 == 0


_POOLS, _POOL_REFS = {}, []   # (id(pool), test) -> the pool's items of that split; the pools, kept alive


def _strings(items):
    """The strings in items (lists of wordings may hold tuples and lists of strings: QA, NUMQA)."""
    for x in items:
        if isinstance(x, str):
            yield x
        elif isinstance(x, (tuple, list)):
            yield from _strings(x)


class Ctx:
    """The random source of one split: every pick honours the split."""

    def __init__(self, rng, split):
        self.r = rng
        self.test = split == "test"
        self.slots = []               # names, products, places, plans ... of this group: never paraphrased
        self.test_wordings = set()    # train: the test-only variants of every list this group chose from

    def v(self, variants):
        """A variant of a list of wordings, from this split's positions."""
        n = len(variants)
        if n == 1:
            return variants[0]
        if n < 4:
            idx = [n - 1] if self.test else list(range(n - 1))
        else:
            idx = [i for i in range(n) if (i % 4 == 3) == self.test]
        if not self.test:
            for i in ([n - 1] if n < 4 else range(3, n, 4)):
                x = variants[i]
                if isinstance(x, str):
                    self.test_wordings.add(x)
                else:
                    self.test_wordings.update(_strings(x))
        return variants[self.r.choice(idx)]

    def pick(self, pool, k=None):
        key = (id(pool), self.test)
        sub = _POOLS.get(key)
        if sub is None:  # the pools are module-level lists: their split is worked out once per process
            sub = [x for x in pool if _is_test_item(x) == self.test]
            _POOLS[key] = sub
            _POOL_REFS.append(pool)
        if k is None:
            x = self.r.choice(sub)
            self.slots.append(x)
            return x
        xs = self.r.sample(sub, k)
        self.slots.extend(xs)
        return xs

    def slot(self, x):
        """x is a value (a plan, a meeting topic), not a wording: paraphrasing leaves it alone."""
        self.slots.extend(_strings([x]))
        return x

    def num(self, lo, hi):
        """An integer in [lo, hi]; values >= 10 honour the split."""
        for _ in range(1000):
            x = self.r.randint(lo, hi)
            if x < 10 or _is_test_item(str(x)) == self.test:
                return x
        return x

    def nums(self, lo, hi, k):
        out = []
        while len(out) < k:
            x = self.num(lo, hi)
            if x not in out:
                out.append(x)
        return out

    def money(self, lo, hi):
        x = self.num(lo, hi)
        cents = self.r.choice(["00", "00", "00", "50", "99", "95", "20", "75"])
        return x, "%d.%s" % (x, cents)

    def coin(self, p=0.5):
        return self.r.random() < p


# ----------------------------------------------------------------------------------------------- vocabularies
FIRST = ("Dana Omar Priya Lukas Mei Tomás Aisha Jonas Elena Kwame Sofia Rahul Ingrid Mateo Yuki Fatima Noah Chloe "
         "Arjun Hannah Diego Leila Erik Zainab Marco Olivia Hiroshi Amara Felix Nadia Samuel Lucia Viktor Grace Ibrahim "
         "Maya Pedro Anika Liam Rosa Kenji Amelia Tariq Clara Oscar Imani Daniel Freya Ravi Beatriz Hugo Alina Kofi "
         "Julia Emil Sara Tobias Layla Andrei Nora Mohammed Eva Caleb Ana Stefan Zoe Ahmed Ida Gabriel Mira Jakub "
         "Chiara Adam Lea Yusuf Maria Leon Anna Ethan Selin Pablo Rina Marek Elif Thomas Keira Martin Asha Bruno "
         "Lotte Victor Nina Paul Helen Ruth Simon Irene Colin Wanda Boris Greta Dmitri Alice Kasper Yara Luis Tara "
         "Nikolai Emma Joel Sana Henrik Laura Rafael Mina Theo Vera").split()
LAST = ("Kowalski Haddad Iyer Becker Chen Alvarez Mensah Novak Petrova Osei Rossi Sharma Lind Garcia Tanaka Rahman "
        "Dubois Nakamura Okafor Silva Fischer Costa Murphy Jensen Moreau Kaplan Horvat Ortiz Varga Nilsen Brennan "
        "Yilmaz Castillo Adeyemi Lehmann Sato Kim Walsh Morales Nguyen Schmidt Bauer Patel Larsen Romero Hughes "
        "Akhtar Weber Santos Kovacs Reyes Lopez Berg Ferreira Ali Popescu Wright Doyle Mendes Keller Ivanova "
        "Svensson Quinn Abara Hartmann Mwangi Bianchi Flores Eriksen Dalton Ahmadi Sousa Marsh Kruger Owusu Vidal "
        "Holm Tran Rocha Fontaine Pereira Marino Cruz Nowak Park Sandoval Barros Hale Jovanovic Lowe Frost").split()
COMPANY = ("Northwind Brightpath Luma Corvid Kestrel Halden Ostara Veldt Pinecrest Solace Tidewater Ironbark "
           "Meridian Quillon Bluefin Sparrowhawk Larkspur Orison Cobalt Redwood Ferncliff Altamira Glenmore "
           "Harbinger Juniper Kinetic Lodestar Marlow Nimbus Oakridge Pellucid Riverside Saltmarsh Thornbury "
           "Umberfield Vantage Westbrook Yarrow Zephyr Ashgrove Birchwood Calloway Driftwood Eastwick Foxglove "
           "Greystone Hollis Ivory Jadeport").split()
CITY = ("Lisbon Oslo Leeds Porto Gdansk Lyon Utrecht Tampere Bilbao Graz Malmo Aarhus Cork Turin Brno Ghent "
        "Seville Bergen Dresden Krakow Nantes Zurich Antwerp Valencia Bristol Riga Tallinn Geneva Bologna Vilnius "
        "Bremen Basel Leipzig Salzburg Aberdeen Toulouse Cardiff Verona Rotterdam Uppsala Lille Mainz").split()
PRODUCT = ["kettle", "desk lamp", "blender", "headphones", "backpack", "coffee grinder", "office chair", "monitor",
           "keyboard", "rain jacket", "water bottle", "air purifier", "toaster", "phone case", "yoga mat",
           "electric toothbrush", "hiking boots", "bluetooth speaker", "rice cooker", "standing desk", "webcam",
           "space heater", "camping stove", "bike helmet", "router", "smartwatch", "vacuum cleaner", "tablet stand",
           "drill", "sleeping bag", "mixing bowl set", "e-reader", "microwave", "hair dryer", "fitness tracker",
           "travel mug", "garden hose", "power bank", "wireless mouse", "frying pan"]
BRAND = ("Aero Nova Pulse Zen Vivo Orbit Echo Flux Terra Apex Lumen Brio Kito Sola Miro Vanta Quill Dune Onyx "
         "Halo Juno Pixel Rook Sable Tivo Ulla Wren Xeno Yoke Zuri").split()
APP = ("Taskly Ledgerly PlanIt Notebox Shiftwise Cartly Billfold Trackr Docuflow Meetly Stockpile Payroll+ Routeo "
       "Clinicly Bookwise Fieldnote Invoicer Crewly Syncbox Formstack").split()
SYSTEM = ["payroll database", "production Kubernetes cluster", "customer CRM", "finance ledger", "HR records system",
          "source code repository", "staging server", "marketing analytics dashboard", "backup storage",
          "VPN gateway", "data warehouse", "support ticket queue", "billing service", "shared drive",
          "build server", "email archive", "inventory system", "warehouse scanner app", "lab results database",
          "clinical trial portal", "design file library", "admin console", "firewall config", "log archive"]
ROLE = ["software engineer", "data analyst", "nurse", "accountant", "warehouse supervisor", "product designer",
        "sales manager", "lab technician", "electrician", "project manager", "teacher", "pharmacist",
        "mechanical engineer", "marketing specialist", "customer support agent", "web developer", "chef",
        "logistics coordinator", "HR generalist", "security analyst", "paralegal", "civil engineer"]
SKILL = ["Python", "SQL", "Excel", "Kubernetes", "project scheduling", "forklift certification", "Spanish", "German",
         "CAD", "phlebotomy", "AutoCAD", "Java", "bookkeeping", "first aid", "negotiation", "copywriting", "React",
         "statistics", "welding", "budget planning", "French", "Tableau", "machine maintenance", "payroll software",
         "Italian", "Rust", "C++", "Photoshop", "public speaking", "SAP", "inventory control", "lab safety", "Go",
         "customer service", "data entry", "TypeScript", "Linux administration", "PLC programming", "risk analysis",
         "quality assurance", "truck licence", "Polish", "accounting", "UX research", "Figma", "cloud networking"]
WEEKDAY = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTH = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
         "November", "December"]
ROOM = ["Room 2B", "the Atlas room", "Room 114", "the Birch room", "the boardroom", "Room 3C", "the Cedar room",
        "Room 407", "the Harbor room", "the Orchid room", "Room 12", "the Summit room", "the library annex",
        "the Maple room", "Room 5A", "the Willow room"]
SENSOR_PLACE = ["freezer C", "fridge 2", "pump house", "north wing", "south wing", "attic", "crawl space", "mixing tank",
                "fermenter 3", "dryer 1", "oven line 2", "aquarium", "seed vault", "paint booth", "archive room",
                "print room", "garage", "chiller 5", "cooling tower", "plant room", "freezer A", "freezer B", "greenhouse north", "greenhouse south", "server rack 3", "server rack 7",
                "tank 1", "tank 2", "boiler room", "cold room", "incubator 4", "incubator 9", "loading dock",
                "clean room", "basement pump", "roof unit", "lab bench 6", "storage bay C", "kiln 2", "vault"]
SERVICE = ["checkout API", "login service", "search index", "mobile push notifications", "payment gateway",
           "image upload service", "reporting dashboard", "email delivery", "order database", "DNS",
           "video streaming", "recommendation engine", "customer portal", "message queue", "CDN edge"]


def person(ctx):
    return "%s %s" % (ctx.pick(FIRST), ctx.pick(LAST))


def first(ctx):
    return ctx.pick(FIRST)


def date(ctx, month=None):
    return "%d %s" % (ctx.r.randint(1, 28), month or ctx.pick(MONTH))


def cap(s):
    return s[:1].upper() + s[1:]


def opt(i, d):
    return {"id": i, "description": d}


# ----------------------------------------------------------------------------------------------- questions
def choice(ctx, question, correct, distractors, k=None, ordinal=None):
    """A criterion: `correct` and `distractors` are (id, description); k options in all (random if None),
    the correct one at a uniformly drawn position. ordinal: options in this fixed order instead."""
    if ordinal is not None:
        opts = [opt(i, d) for i, d in ordinal]
        return {"question": question, "options": opts, "answer": correct}
    ds = list(distractors)
    ctx.r.shuffle(ds)
    if k is None:
        k = ctx.r.randint(2, 5)
    k = max(2, min(k, len(ds) + 1))
    ds = ds[:k - 1]
    pos = ctx.r.randrange(k)
    opts = [opt(i, d) for i, d in ds]
    opts.insert(pos, opt(correct[0], correct[1]))
    return {"question": question, "options": opts, "answer": correct[0]}


def yes_no(ctx, question, truth, yes=None, no=None, not_stated=None, stated=True):
    """Yes / no (/ not stated). truth: True, False; stated False makes 'not stated' the answer."""
    y = ("yes", yes or "Yes")
    n = ("no", no or "No")
    ns = ("not_stated", not_stated or ctx.v(["The evidence does not say", "Not stated", "Not mentioned in the text",
                                             "Cannot be determined from the text", "Unknown from the evidence"]))
    if not stated:
        ans, others = ns, [y, n]
        return choice(ctx, question, ans, others, k=3)
    ans = y if truth else n
    others = [n if truth else y]
    if ctx.coin(0.35):
        others.append(ns)
    return choice(ctx, question, ans, others, k=len(others) + 1)


def ordinal(ctx, question, levels, answer):
    """levels: [(id, description)] in natural order; some rows show them reversed."""
    lv = list(levels)
    if ctx.coin(0.3):
        lv.reverse()
    return {"question": question, "options": [opt(i, d) for i, d in lv], "answer": answer}


def extract(ctx, question, value, distractor_values, k=None, none_of=None):
    """Pick the value the evidence gives; distractors include values that also appear in the text."""
    ds = [(str(d), str(d)) for d in distractor_values if str(d) != str(value)]
    seen, uniq = set(), []
    for d in ds:
        if d[0] not in seen:
            seen.add(d[0])
            uniq.append(d)
    ids = {}
    def _id(s):
        ids.setdefault(s, "v%d" % (len(ids) + 1))
        return ids[s]
    corr = (_id(str(value)), str(value))
    ds = [(_id(d[0]), d[1]) for d in uniq]
    if none_of:
        ds.append(("none", none_of))
    return choice(ctx, question, corr, ds, k=k)


# ----------------------------------------------------------------------------------------------- families
def fam_ticket_triage(ctx):
    name = person(ctx)
    fn = name.split()[0]
    app = ctx.pick(APP)
    plan = ctx.slot(ctx.v(["Pro", "Team", "Basic", "Enterprise", "Starter", "Plus", "Business", "Premium"]))
    price_i, price = ctx.money(12, 480)
    kind = ctx.r.choice(["double_charge", "wrong_amount", "locked", "twofa", "crash", "export", "feature",
                         "late", "damaged", "cancel"])
    order = "%s-%d" % (ctx.r.choice("ABCDEFGHKMPRSTW"), ctx.num(10000, 99999))
    users = ctx.r.choice([1, 1, ctx.num(12, 400)])
    deadline = ctx.coin(0.35)
    dl = ctx.v(["payroll has to run by noon today", "we have a client demo in two hours",
                "the quarterly filing is due this afternoon", "our store opens in an hour",
                "the board meeting starts at 3 pm today", "we ship the release tonight",
                "the invoices must go out before 5 pm today", "the exam starts in ninety minutes"])
    wants_refund = kind in ("double_charge", "wrong_amount", "damaged", "late", "cancel") and ctx.coin(0.6)
    charged_i, charged = ctx.money(12, 480)
    body = {
        "double_charge": ctx.v(["I was billed ${p} twice for my {plan} plan this month; both charges are on my card.",
                                "My card shows two identical charges of ${p} for the {plan} subscription.",
                                "You charged me ${p} two times on the same day for {plan}.",
                                "There is a duplicate payment of ${p} on my statement for the {plan} plan.",
                                "I see the same ${p} charge twice for {plan} on my bank app."]),
        "wrong_amount": ctx.v(["My {plan} plan costs ${p} but this month I was charged ${c}.",
                               "The invoice says ${c} although the {plan} plan is ${p} a month.",
                               "I got billed ${c} instead of the usual ${p} for {plan}.",
                               "Why was I charged ${c}? The {plan} price on your site is ${p}.",
                               "The renewal for {plan} came to ${c}, not the ${p} I agreed to."]),
        "locked": ctx.v(["I can't log in to {app} since this morning, it says my account is locked.",
                         "Every time I try to sign in to {app} I get 'account locked'.",
                         "{app} keeps rejecting my password and now the account is locked out.",
                         "I'm locked out of my {app} account after the password reset.",
                         "Login to {app} fails with 'too many attempts, account locked'."]),
        "twofa": ctx.v(["The two-factor code for {app} never arrives, so I cannot get into my account.",
                        "{app} asks for a verification code but no SMS comes, I'm stuck at the login screen.",
                        "I changed phones and now {app}'s 2FA blocks me from signing in.",
                        "My authenticator codes are rejected by {app} and I can't log in.",
                        "No login code reaches my email, so {app} won't let me in."]),
        "crash": ctx.v(["{app} crashes every time I open the reports page.",
                        "The {app} app closes itself as soon as I tap 'Save'.",
                        "Since the last update {app} freezes and then quits when I upload a file.",
                        "{app} shows a blank screen and then crashes on startup.",
                        "Whenever I click Export, {app} throws an error and shuts down."]),
        "export": ctx.v(["Exporting to CSV in {app} gives a file with all the dates wrong.",
                         "The PDF export from {app} cuts off the last page of every report.",
                         "{app} exports totals that don't match what the dashboard shows.",
                         "When I export my data from {app}, half the rows are missing.",
                         "The spreadsheet {app} exports has every amount shifted by one column."]),
        "feature": ctx.v(["It would be great if {app} had a dark mode.",
                          "Could you add a way to schedule reports in {app}? That would save us time.",
                          "Please consider letting {app} export to Google Sheets directly.",
                          "Feature idea: bulk editing of tags in {app}.",
                          "We'd love a calendar view in {app} in a future version."]),
        "late": ctx.v(["My order {o} was supposed to arrive last week and still hasn't come.",
                       "Order {o} is ten days late and the tracking hasn't moved.",
                       "I'm still waiting for order {o}; the delivery date passed on Monday.",
                       "Where is my package? Order {o} should have been here by now.",
                       "Order {o} shows 'in transit' for two weeks now."]),
        "damaged": ctx.v(["Order {o} arrived today but the box was crushed and the item is broken.",
                          "The parcel for order {o} came damaged, the glass is cracked.",
                          "Order {o} was delivered with a dent and it doesn't turn on.",
                          "The item in order {o} arrived smashed.",
                          "My delivery ({o}) came with a torn box and a broken part."]),
        "cancel": ctx.v(["Please cancel my {plan} subscription at the end of this month.",
                         "I want to close my {app} account and stop the {plan} plan.",
                         "How do I cancel {plan}? I don't need it anymore.",
                         "Kindly end my {plan} membership, we moved to another tool.",
                         "Stop my {plan} plan from renewing, I'm cancelling."]),
    }[kind].format(p=price, c=charged, plan=plan, app=app, o=order)
    scope = ""
    if users > 1:
        scope = ctx.v(["Our whole team of {n} people is affected.", "This is happening to all {n} users in our company.",
                       "{n} of our staff are blocked right now.", "It affects {n} people at our office.",
                       "All {n} accounts on our plan see the same thing."]).format(n=users)
    refund_txt = ""
    if kind in ("double_charge", "wrong_amount", "damaged", "late", "cancel"):
        if wants_refund:
            refund_txt = ctx.v(["Please refund the money.", "I'd like my money back.", "I want a refund.",
                                "Could you return the extra amount to my card?", "Please issue a refund."])
        else:
            refund_txt = ctx.v(["I'm not asking for a refund, just fix it.", "No refund needed, I only want it sorted.",
                                "I don't want my money back, just a working account.",
                                "A refund is not necessary.", "You don't need to refund anything."])
    extra = ctx.v(["Everything else works fine.", "Thanks in advance.", "I've been a customer for years.",
                   "I already tried restarting.", "Let me know if you need more details.", "Cheers."])
    parts = [body, scope, (ctx.v(["Also, ", "And ", "Note: ", "FYI "]) + dl + ".") if deadline else "",
             refund_txt, extra]
    text = " ".join(p for p in parts if p)
    style = ctx.v(["email", "chat", "form", "note", "email2", "plain", "chat2", "form2"])
    if style in ("email", "email2"):
        subj = ctx.v(["Problem with my account", "Urgent help", "Question", "Issue with " + app, "Help please",
                      "Re: " + plan + " plan", "Order " + order, "Support request"])
        ev = "Subject: %s\n\n%s %s\n%s" % (subj, ctx.v(["Hi,", "Hello,", "Dear support,", "Hey team,", "Good morning,"]),
                                           text, ("- " if style == "email" else "Regards,\n") + fn)
    elif style in ("chat", "chat2"):
        ev = "[%02d:%02d] %s: %s" % (ctx.r.randint(7, 22), ctx.r.randint(0, 59), fn.lower() if style == "chat" else fn, text)
    elif style in ("form", "form2"):
        ev = "Customer: %s\nProduct: %s (%s plan)\nMessage: %s" % (name, app, plan, text)
    else:
        ev = text
    cat = {"double_charge": "billing", "wrong_amount": "billing", "locked": "access", "twofa": "access",
           "crash": "bug", "export": "bug", "feature": "feature", "late": "delivery", "damaged": "delivery",
           "cancel": "cancel"}[kind]
    cats = {"billing": ctx.v(["Billing or payment problem", "A billing issue", "Payment or charges",
                              "Money charged incorrectly"]),
            "access": ctx.v(["Trouble logging in or accessing the account", "Account access problem",
                             "Login or sign-in issue", "Cannot get into the account"]),
            "bug": ctx.v(["Software defect or malfunction", "A bug in the app", "The product is not working correctly",
                          "Technical fault in the software"]),
            "feature": ctx.v(["Request for new functionality", "A feature request", "Suggestion for a new feature",
                              "Idea for improving the product"]),
            "delivery": ctx.v(["Problem with a physical delivery", "Shipping or delivery issue", "A late or damaged parcel",
                               "Delivery problem"]),
            "cancel": ctx.v(["Cancellation of a subscription", "Wants to cancel", "Ending the service",
                             "Closing the account or plan"])}
    qs = []
    qs.append(choice(ctx, ctx.v(["Which category does this support ticket belong to?", "What is this ticket about?",
                                 "How should this ticket be categorised?", "Classify the customer's request.",
                                 "What kind of issue is the customer reporting?"]),
                     (cat, cats[cat]), [(k, v) for k, v in cats.items() if k != cat]))
    if kind in ("double_charge", "wrong_amount", "damaged", "late", "cancel"):
        qs.append(yes_no(ctx, ctx.v(["Does the customer ask for a refund?", "Is the customer asking for money back?",
                                     "Does the customer want a refund?", "Is a refund requested?"]), wants_refund))
    blocked = kind in ("locked", "twofa", "crash")
    if kind == "feature":
        urg = "low"
    elif users > 1 and deadline and blocked:
        urg = "critical"
    elif users > 1 or deadline:
        urg = "high"
    else:
        urg = "normal"
    levels = [("low", ctx.v(["Low: minor, no time pressure", "Low", "Low priority", "Low: can wait"])),
              ("normal", ctx.v(["Normal: one person affected", "Normal", "Medium priority", "Normal: a single user"])),
              ("high", ctx.v(["High: many users or a deadline", "High", "High priority", "High: wide impact or time pressure"])),
              ("critical", ctx.v(["Critical: many users blocked with a deadline within hours", "Critical",
                                  "Critical: a team is blocked and time runs out today", "Urgent and critical"]))]
    if kind in ("feature", "locked", "twofa", "crash", "export"):
        qs.append(ordinal(ctx, ctx.v(["How urgent is this ticket?", "What priority should this ticket get?",
                                      "Rate the urgency of the request.", "Which priority fits this ticket?"]),
                          levels, urg))
    if kind in ("wrong_amount",):
        qs.append(extract(ctx, ctx.v(["How much was the customer actually charged?", "What amount did the customer pay this time?",
                                      "What was the charged amount?", "Which amount appeared on the bill?"]),
                          "$" + charged, ["$" + price, "$%d.00" % (charged_i + ctx.r.randint(1, 30))], k=3))
    if kind in ("late", "damaged"):
        other = "%s-%d" % (order[0], ctx.num(10000, 99999))
        qs.append(extract(ctx, ctx.v(["Which order is the ticket about?", "What is the order number?",
                                      "Which order number does the customer give?", "Name the order in question."]),
                          order, [other, "%s-%s" % (order[0], order[2:][::-1] + order[2])], k=ctx.r.randint(2, 3),
                          none_of=ctx.v(["No order number is given", "None is mentioned", "Not stated", "No order given"])))
    if users > 1:
        qs.append(yes_no(ctx, ctx.v(["Are several people affected?", "Does the problem affect more than one user?",
                                     "Is more than one person affected?", "Are multiple users affected?"]), True))
    elif kind not in ("feature", "cancel"):
        qs.append(yes_no(ctx, ctx.v(["Are several people affected?", "Does the problem affect more than one user?",
                                     "Is more than one person affected?", "Are multiple users affected?"]), False))
    return ev, qs


def fam_order_invoice(ctx):
    comp = ctx.pick(COMPANY)
    cust = person(ctx)
    items = ctx.pick(PRODUCT, ctx.r.randint(2, 4))
    qty = [ctx.r.randint(1, 6) for _ in items]
    unit = ctx.nums(10, 420, len(items))
    lines = [q * u for q, u in zip(qty, unit)]
    ship = ctx.r.choice([0, ctx.num(10, 40)])
    total = sum(lines) + ship
    cur = ctx.v(["EUR", "USD", "GBP", "CHF", "SEK", "NOK", "PLN", "CAD"])
    sym = {"EUR": "€", "USD": "$", "GBP": "£"}.get(cur, cur + " ")
    inv = "%s-%d" % (ctx.v(["INV", "INV", "INV", "BILL", "IN", "NO", "INV", "FAC"]), ctx.num(1000, 99999))
    status = ctx.r.choice(["paid", "unpaid", "partial", "unknown"])
    paid_amt = ctx.num(10, max(11, total - 1)) if status == "partial" else total
    due = date(ctx)
    issued = date(ctx)
    style = ctx.v(["invoice", "order_email", "receipt", "table", "invoice2", "order_email2", "receipt2", "table2"])
    def money(x):
        return "%s%d.00" % (sym, x)
    if style.startswith("invoice"):
        rows = "\n".join("%d x %s @ %s = %s" % (q, it, money(u), money(l)) for q, it, u, l in zip(qty, items, unit, lines))
        ev = "INVOICE %s\nFrom: %s Ltd\nBill to: %s\nIssued: %s   Due: %s\n%s\n%sTotal: %s" % (
            inv, comp, cust, issued, due, rows, ("Shipping: %s\n" % money(ship)) if ship else "", money(total))
    elif style.startswith("order_email"):
        rows = "; ".join("%s (%d pcs, %s each)" % (it, q, money(u)) for q, it, u in zip(qty, items, unit))
        ev = ("Hi %s,\nthanks for your order %s at %s. You ordered: %s.%s The order total is %s, payable by %s."
              % (cust.split()[0], inv, comp, rows, (" Delivery costs %s." % money(ship)) if ship else " Delivery is free.",
                 money(total), due))
    elif style.startswith("receipt"):
        rows = "\n".join("%-18s %2d %10s" % (it, q, money(l)) for q, it, l in zip(qty, items, lines))
        ev = "%s - RECEIPT %s\n%s\n%sTOTAL %s\nCustomer: %s" % (comp.upper(), inv, rows,
                                                              ("Shipping %s\n" % money(ship)) if ship else "", money(total), cust)
    else:
        rows = "\n".join("| %s | %d | %s |" % (it, q, money(u)) for q, it, u in zip(qty, items, unit))
        ev = "Order %s for %s (%s)\n| item | qty | unit price |\n%s\nShipping: %s. Grand total: %s. Due %s." % (
            inv, cust, comp, rows, money(ship) if ship else "none", money(total), due)
    if status == "paid":
        ev += "\n" + ctx.v(["Status: PAID", "Payment received, thank you.", "Paid in full on " + date(ctx) + ".",
                            "Settled by card.", "Balance: 0.00 - paid."])
    elif status == "unpaid":
        ev += "\n" + ctx.v(["Status: UNPAID", "Payment not yet received.", "This invoice is still open.",
                            "Outstanding: the full amount.", "Awaiting payment."])
    elif status == "partial":
        ev += "\n" + ctx.v(["Received so far: %s." , "A deposit of %s has been paid.", "Paid: %s, the rest is open.",
                            "Partial payment of %s received.", "Part payment received (%s)."]) % money(paid_amt)
    qs = []
    qs.append(extract(ctx, ctx.v(["What is the total amount of this order?", "What is the grand total?",
                                  "How much is due in total?", "What is the invoice total?", "What does the customer owe in total?"]),
                      money(total), [money(sum(lines)) if ship else money(total + ctx.r.randint(5, 60)),
                                     money(max(lines)), money(lines[0] + 1 if len(lines) else 1), money(paid_amt)],
                      k=ctx.r.randint(3, 5)))
    big = items[lines.index(max(lines))]
    ui = items[unit.index(max(unit))]
    if ctx.coin():
        qs.append(extract(ctx, ctx.v(["Which line item costs the most in total?", "Which item accounts for the largest amount?",
                                      "Which product is the biggest part of the bill?", "On which item was the most money spent?"]),
                          big, [it for it in items if it != big] + [p for p in ctx.pick(PRODUCT, 2) if p not in items],
                          k=min(5, len(items) + 1)))
    else:
        qs.append(extract(ctx, ctx.v(["Which item has the highest unit price?", "What is the most expensive product per piece?",
                                      "Which product costs the most per unit?", "Which item is the priciest per unit?"]),
                          ui, [it for it in items if it != ui], k=len(items)))
    pstat = {"paid": "paid", "unpaid": "unpaid", "partial": "partial", "unknown": "unknown"}[status]
    qs.append(choice(ctx, ctx.v(["Has this invoice been paid?", "What is the payment status?", "Is the bill settled?",
                                 "Was the order paid for?"]),
                     (pstat, {"paid": ctx.v(["Yes, paid in full", "Paid", "Fully paid", "Settled"]),
                              "unpaid": ctx.v(["No, nothing paid yet", "Unpaid", "Not paid", "Still open, nothing received"]),
                              "partial": ctx.v(["Only partly paid", "Partially paid", "A part was paid", "Partly settled"]),
                              "unknown": ctx.v(["The evidence does not say", "Not stated", "Unknown", "Not mentioned"])}[pstat]),
                     [(k, v) for k, v in {"paid": "Paid in full", "unpaid": "Not paid at all", "partial": "Partly paid",
                                          "unknown": "The text does not say"}.items() if k != pstat], k=ctx.r.randint(3, 4)))
    thr = ctx.num(50, 2000)
    if thr != total:
        qs.append(yes_no(ctx, ctx.v(["Is the total more than {s}{t}?", "Does the order total exceed {s}{t}?",
                                     "Is the amount due above {s}{t}?", "Is the grand total greater than {s}{t}?"]).format(s=sym, t=thr),
                         total > thr))
    n_items = sum(qty)
    qs.append(extract(ctx, ctx.v(["How many pieces were ordered in total?", "What is the total number of units?",
                                  "How many items does the order contain altogether?", "Count the units ordered."]),
                      n_items, [n_items + 1, n_items - 1 if n_items > 1 else n_items + 2, len(items), max(qty) + n_items],
                      k=ctx.r.randint(3, 4)))
    return ev, qs


def fam_access_request(ctx):
    who = person(ctx)
    role = ctx.v(["employee", "contractor", "intern", "employee", "vendor", "contractor", "employee", "temporary worker"])
    kind_staff = role == "employee"
    system = ctx.pick(SYSTEM)
    level = ctx.r.choice(["read", "write", "admin"])
    days = ctx.r.choice([ctx.num(1, 9), ctx.num(10, 120)])
    mgr = ctx.r.choice(["yes", "no", "unknown"])
    training = ctx.r.choice(["yes", "no", "unknown"])
    manager = person(ctx)
    max_days = ctx.num(10, 120)
    rules = [
        ("mgr", ctx.v(["All requests need written approval from the requester's manager.",
                       "A manager must approve every access request.",
                       "No access is granted without the line manager's sign-off.",
                       "Requests require manager approval.", "Manager approval is mandatory."])),
        ("admin", ctx.v(["Admin access is only for employees, never for contractors, interns or vendors.",
                         "Only employees may hold admin rights.",
                         "Non-employees cannot receive admin access.",
                         "Admin level is restricted to staff employees.", "Admin rights: employees only."])),
        ("days", ctx.v(["Access may be granted for at most {m} days.", "The maximum duration is {m} days.",
                        "Grants longer than {m} days are not allowed.", "No request may exceed {m} days.",
                        "Access periods are capped at {m} days."]).format(m=max_days)),
        ("train", ctx.v(["Security training must be completed before access is granted.",
                         "Requesters must have finished the security course.",
                         "Completed security training is required.", "Access requires the annual security training.",
                         "The security awareness module must be done first."])),
    ]
    ctx.r.shuffle(rules)
    rules = rules[:ctx.r.randint(2, 4)]
    form = [("Requester", "%s (%s)" % (who, role)), ("System", system), ("Access level", level),
            ("Duration", "%d days" % days)]
    if mgr != "unknown":
        form.append(("Manager approval", ctx.v(["yes, %s", "approved by %s", "granted (%s)", "signed by %s"]) % manager
                     if mgr == "yes" else ctx.v(["no", "not yet", "pending", "missing", "declined by %s" % manager])))
    if training != "unknown":
        form.append(("Security training", ctx.v(["completed " + date(ctx), "done", "completed", "finished on " + date(ctx)])
                     if training == "yes" else ctx.v(["not completed", "outstanding", "not started", "overdue"])))
    ctx.r.shuffle(form[2:])
    style = ctx.v(["form", "prose", "ticket", "form2", "prose2", "ticket2", "form3", "prose3"])
    policy = "Policy: " + " ".join(r[1] for r in rules)
    if style.startswith("form"):
        req = "\n".join("%s: %s" % kv for kv in form)
    elif style.startswith("prose"):
        d = dict(form)
        req = "%s asks for %s access to the %s for %s." % (d["Requester"], level, system, d["Duration"])
        if "Manager approval" in d:
            req += " Manager approval: %s." % d["Manager approval"]
        if "Security training" in d:
            req += " Security training: %s." % d["Security training"]
    else:
        req = "ACCESS-%d | %s" % (ctx.num(100, 9999), " | ".join("%s=%s" % (k.lower().replace(" ", "_"), v) for k, v in form))
    ev = policy + "\n\nRequest:\n" + req if ctx.coin() else "Request:\n" + req + "\n\n" + policy
    viol, unknown = [], []
    for rid, _ in rules:
        if rid == "mgr":
            (viol if mgr == "no" else unknown if mgr == "unknown" else []).append("mgr")
        if rid == "admin" and level == "admin" and not kind_staff:
            viol.append("admin")
        if rid == "days" and days > max_days:
            viol.append("days")
        if rid == "train":
            (viol if training == "no" else unknown if training == "unknown" else []).append("train")
    qs = []
    if viol:
        dec = "deny"
    elif unknown:
        dec = "info"
    else:
        dec = "approve"
    qs.append(choice(ctx, ctx.v(["Should this access request be approved under the policy?", "What is the right decision on this request?",
                                 "Does the request comply with the policy?", "How should the request be handled?",
                                 "Decide the request according to the policy."]),
                     (dec, {"approve": ctx.v(["Approve: it meets every rule", "Approve", "Grant the access", "It complies; approve"]),
                            "deny": ctx.v(["Deny: it breaks a rule", "Reject", "Refuse the access", "It violates the policy; deny"]),
                            "info": ctx.v(["Ask for missing information first", "Cannot decide yet: information is missing",
                                           "Request more details", "Hold until the missing facts are known"])}[dec]),
                     [(k, v) for k, v in {"approve": "Approve the request", "deny": "Deny the request",
                                          "info": "Ask for more information"}.items() if k != dec], k=3))
    names = {"mgr": ctx.v(["Missing manager approval", "No manager sign-off", "Manager approval rule", "Lacks approval"]),
             "admin": ctx.v(["Admin rights for a non-employee", "Admin access for a contractor or other non-employee",
                             "Admin restricted to employees", "Wrong person type for admin"]),
             "days": ctx.v(["Duration longer than allowed", "Too many days requested", "Exceeds the maximum duration",
                            "Time limit exceeded"]),
             "train": ctx.v(["Security training not completed", "Missing security training", "Training requirement not met",
                             "No security course"])}
    if len(viol) == 1:
        v = viol[0]
        qs.append(choice(ctx, ctx.v(["Which rule does the request break?", "Which policy rule is violated?",
                                     "What is wrong with this request?", "Which requirement is not met?"]),
                         (v, names[v]), [(k, n) for k, n in names.items() if k != v] +
                         [("none", ctx.v(["None, it complies", "No rule is broken", "Nothing", "It breaks no rule"]))],
                         k=ctx.r.randint(3, 5)))
    elif not viol and not unknown:
        qs.append(choice(ctx, ctx.v(["Which rule does the request break?", "Which policy rule is violated?",
                                     "What is wrong with this request?", "Which requirement is not met?"]),
                         ("none", ctx.v(["None, it complies", "No rule is broken", "Nothing", "It breaks no rule"])),
                         list(names.items()), k=ctx.r.randint(3, 5)))
    qs.append(yes_no(ctx, ctx.v(["Is the requested duration within the allowed maximum?", "Is the access period short enough?",
                                 "Does the duration respect the limit?", "Is the length of access allowed?"]),
                     days <= max_days, stated=any(r[0] == "days" for r in rules) or ctx.coin(0.0)) if any(r[0] == "days" for r in rules)
              else yes_no(ctx, ctx.v(["Has the manager approved the request?", "Is there a manager approval?",
                                      "Did the manager sign off?", "Was the request approved by a manager?"]),
                          mgr == "yes", stated=mgr != "unknown"))
    qs.append(choice(ctx, ctx.v(["What access level is requested?", "Which permission level is asked for?",
                                 "What level of access does the requester want?", "Requested access level?"]),
                     (level, {"read": "Read-only", "write": "Read and write", "admin": "Administrator"}[level]),
                     [(k, v) for k, v in {"read": "Read-only", "write": "Read and write", "admin": "Administrator",
                                          "none": "No access"}.items() if k != level], k=ctx.r.randint(2, 4)))
    return ev, qs


def fam_product_review(ctx):
    brand = ctx.pick(BRAND)
    prod = ctx.pick(PRODUCT)
    name = "%s %s" % (brand, prod)
    sent = ctx.r.choice(["positive", "negative", "mixed", "neutral"])
    aspect = ctx.r.choice(["battery", "price", "delivery", "quality", "noise", "size", "support"])
    stars = {"positive": ctx.r.choice([4, 5]), "negative": ctx.r.choice([1, 2]), "mixed": 3, "neutral": 3}[sent]
    intent = ctx.r.choice(["return", "recommend", "none"]) if sent != "neutral" else "none"
    if sent == "positive" and intent == "return":
        intent = "recommend"
    if sent == "negative" and intent == "recommend":
        intent = "return"
    pos = {"battery": ["the battery lasts for days", "battery life is excellent", "it holds a charge all week", "one charge keeps it going for ages"],
           "price": ["it was a bargain", "great value for the money", "the price is fair", "it cost less than I expected"],
           "delivery": ["it arrived a day early", "shipping was quick", "delivery was fast and well packed", "the courier brought it the next morning"],
           "quality": ["it feels solid and well made", "the build quality is great", "the materials are sturdy", "it is built like a tank"],
           "noise": ["it is whisper quiet", "it makes almost no noise", "it runs silently", "I can barely hear it running"],
           "size": ["it fits perfectly on my desk", "the size is just right", "it is compact and light", "it takes up hardly any space"],
           "support": ["support answered within an hour", "customer service was very helpful", "the helpdesk sorted everything", "the service team replied the same day"]}
    neg = {"battery": ["the battery dies after two hours", "battery life is awful", "it needs charging twice a day", "the charge is gone by lunchtime"],
           "price": ["it is far too expensive for what it is", "way overpriced", "not worth the money", "I paid double what it is worth"],
           "delivery": ["it arrived two weeks late", "the parcel was lost once", "delivery took forever", "the courier left it in the rain a week late"],
           "quality": ["a part snapped after a week", "it feels cheap and flimsy", "the seams came apart", "it broke on the third use"],
           "noise": ["it is incredibly loud", "the rattling noise is unbearable", "it hums constantly", "it screeches every time it starts"],
           "size": ["it is much bigger than the photos suggest", "it's too small to be useful", "it doesn't fit anywhere", "it is twice the size I expected"],
           "support": ["support never replied to my emails", "customer service was rude", "nobody answers the helpline", "the help desk closed my ticket without an answer"]}
    other = ctx.r.choice([a for a in pos if a != aspect])
    if sent == "positive":
        body = "%s, and %s." % (cap(ctx.v(pos[aspect])), ctx.v(pos[other]))
    elif sent == "negative":
        body = "%s. %s." % (cap(ctx.v(neg[aspect])),
                             ctx.v(["On top of that ", "Also ", "And ", "Worse, "]) + ctx.v(neg[other]))
    elif sent == "mixed":
        body = "%s, but %s." % (cap(ctx.v(pos[other])), ctx.v(neg[aspect]))
    else:
        body = ctx.v(["It does what the box says, nothing more, nothing less.", "It's an ordinary %s. Works as expected." % prod,
                      "Average product. No complaints, no praise.", "It is fine. Neither good nor bad.",
                      "Does the job. Not remarkable either way."])
    tail = {"return": ctx.v(["I'm sending it back.", "Returning it tomorrow.", "I've asked for a return.", "It goes back to the shop."]),
            "recommend": ctx.v(["I'd recommend it to anyone.", "Highly recommended!", "Would buy again and recommend to friends.",
                                "My sister bought one after trying mine."]),
            "none": ""}[intent]
    by = first(ctx)
    style = ctx.v(["stars", "plain", "titled", "stars2", "plain2", "titled2", "stars3", "plain3"])
    text = (body + " " + tail).strip()
    if style.startswith("stars"):
        ev = "%s\n%s/5 stars - %s\n%s" % (name, stars, by, text)
    elif style.startswith("titled"):
        title = {"positive": ctx.v(["Love it", "Great buy", "Impressed", "Very happy"]),
                 "negative": ctx.v(["Disappointed", "Avoid", "Not good", "Regret it"]),
                 "mixed": ctx.v(["Good and bad", "Mixed feelings", "Could be better", "Some issues"]),
                 "neutral": ctx.v(["OK", "It's fine", "Average", "As expected"])}[sent]
        ev = "Review of the %s by %s: \"%s\"\n%s" % (name, by, title, text)
    else:
        ev = "Bought the %s %s. %s" % (name, ctx.v(["last month", "for my office", "as a gift", "two weeks ago", "on sale"]), text)
    sdesc = {"positive": ctx.v(["Positive", "Positive overall", "The reviewer is happy", "Favourable"]),
             "negative": ctx.v(["Negative", "Negative overall", "The reviewer is unhappy", "Unfavourable"]),
             "mixed": ctx.v(["Mixed: both praise and complaints", "Mixed", "Partly positive, partly negative", "Both good and bad points"]),
             "neutral": ctx.v(["Neutral", "Neither positive nor negative", "Indifferent", "Neutral, no strong opinion"])}
    qs = []
    opts4 = list(sdesc.items())
    if ctx.coin(0.5) and sent != "mixed":
        opts4 = [o for o in opts4 if o[0] != "mixed"]
    qs.append(choice(ctx, ctx.v(["What is the overall sentiment of the review?", "How does the reviewer feel about the product?",
                                 "What is the tone of this review?", "Is the review positive or negative?"]),
                     (sent, sdesc[sent]), [o for o in opts4 if o[0] != sent], k=len(opts4)))
    if sent in ("negative", "mixed"):
        an = {"battery": "Battery life", "price": "The price", "delivery": "The delivery", "quality": "Build quality",
              "noise": "Noise", "size": "The size", "support": "Customer support"}
        qs.append(choice(ctx, ctx.v(["What does the reviewer complain about?", "Which aspect is criticised?",
                                     "What is the main complaint?", "What went wrong, according to the review?"]),
                         (aspect, an[aspect]), [(k, v) for k, v in an.items() if k != aspect and k != other] +
                         ([(other, an[other])] if sent == "mixed" else []), k=ctx.r.randint(3, 5)))
    idesc = {"return": ctx.v(["Return the product", "Send it back", "Ask for a return", "Give it back to the seller"]),
             "recommend": ctx.v(["Recommend it to others", "Recommend the product", "Tell others to buy it", "Buy it again / recommend"]),
             "none": ctx.v(["Neither: no plan is stated", "Nothing is stated", "No intention mentioned", "None of these"])}
    qs.append(choice(ctx, ctx.v(["What does the reviewer intend to do?", "What action does the reviewer plan?",
                                 "What will the reviewer do next?", "Which intention does the review express?"]),
                     (intent, idesc[intent]), [(k, v) for k, v in idesc.items() if k != intent], k=3))
    if style.startswith("stars"):
        qs.append(extract(ctx, ctx.v(["How many stars did the reviewer give?", "What rating does the review carry?",
                                      "What is the star rating?", "How many stars out of five?"]),
                          stars, [s for s in (1, 2, 3, 4, 5) if s != stars], k=ctx.r.randint(3, 5)))
    return ev, qs


def fam_sensor_readings(ctx):
    places = ctx.pick(SENSOR_PLACE, ctx.r.randint(3, 5))
    kind = ctx.r.choice(["temp", "humid", "pressure", "co2"])
    unit, lo, hi = {"temp": ("°C", 10, 95), "humid": ("%", 10, 99), "pressure": ("kPa", 10, 400),
                    "co2": ("ppm", 300, 2400)}[kind]
    vals = ctx.nums(lo, hi, len(places))
    missing = ctx.coin(0.2)
    miss_i = ctx.r.randrange(len(places)) if missing else -1
    limit = ctx.num(lo + 5, hi - 5)
    label = {"temp": "temperature", "humid": "humidity", "pressure": "pressure", "co2": "CO2 level"}[kind]
    t0 = ctx.r.randint(0, 20)
    style = ctx.v(["log", "table", "prose", "csv", "log2", "table2", "prose2", "csv2"])
    recs = []
    for i, (p, v) in enumerate(zip(places, vals)):
        recs.append((p, None if i == miss_i else v))
    if style.startswith("log"):
        ev = "\n".join("%02d:%02d %s %s=%s" % (t0, 5 * i, p, label.replace(" ", "_"), ("%d%s" % (v, unit)) if v is not None else "ERR no reading")
                       for i, (p, v) in enumerate(recs))
    elif style.startswith("table"):
        ev = "%s readings (%s)\n" % (label.capitalize(), unit) + "\n".join("%-16s %s" % (p, v if v is not None else "--") for p, v in recs)
    elif style.startswith("csv"):
        ev = "sensor,%s_%s\n" % (label.replace(" ", "_"), unit.replace("°", "deg").replace("%", "pct")) + \
             "\n".join("%s,%s" % (p, v if v is not None else "") for p, v in recs)
    else:
        ev = "At %02d:00 the %s was %s." % (t0, label, "; ".join(("%d %s in the %s" % (v, unit, p)) if v is not None
                                                                   else "no reading from the %s" % p for p, v in recs))
    ev += "\n" + ctx.v(["Alarm threshold: %d %s.", "Limit: %d %s.", "Alert if above %d %s.", "Maximum allowed: %d %s.",
                        "Upper limit %d %s."]) % (limit, unit)
    present = [(p, v) for p, v in recs if v is not None]
    qs = []
    hi_p = max(present, key=lambda t: t[1])[0]
    lo_p = min(present, key=lambda t: t[1])[0]
    if ctx.coin():
        qs.append(choice(ctx, ctx.v(["Which location has the highest {l}?", "Where was the highest {l} measured?",
                                     "Which sensor reads the most?", "Which place shows the maximum {l}?"]).format(l=label),
                         ("v1", hi_p), [("v%d" % (i + 2), p) for i, p in enumerate(pp for pp in places if pp != hi_p)], k=len(places)))
    else:
        qs.append(choice(ctx, ctx.v(["Which location has the lowest {l}?", "Where was the lowest {l} measured?",
                                     "Which sensor reads the least?", "Which place shows the minimum {l}?"]).format(l=label),
                         ("v1", lo_p), [("v%d" % (i + 2), p) for i, p in enumerate(pp for pp in places if pp != lo_p)], k=len(places)))
    p, v = ctx.r.choice(recs)
    qs.append(yes_no(ctx, ctx.v(["Is the reading of the {p} above the alarm threshold?", "Does the {p} exceed the limit?",
                                 "Is the {p} over the allowed maximum?", "Should the {p} raise an alarm?"]).format(p=p),
                     v is not None and v > limit, stated=v is not None))
    over = [pp for pp, vv in present if vv > limit]
    n_over = len(over)
    qs.append(extract(ctx, ctx.v(["How many locations are above the threshold?", "How many sensors exceed the limit?",
                                  "Count the readings over the alarm threshold.", "How many places should raise an alarm?"]),
                      n_over, [n_over + 1, max(0, n_over - 1) if n_over else n_over + 2, len(places)], k=ctx.r.randint(3, 4)))
    if missing:
        mp = places[miss_i]
        qs.append(choice(ctx, ctx.v(["Which sensor has no reading?", "Which location failed to report?",
                                     "Where is the reading missing?", "Which sensor did not send a value?"]),
                         ("v1", mp), [("v%d" % (i + 2), p) for i, p in enumerate(pp for pp in places if pp != mp)] +
                         [("none", ctx.v(["All sensors reported", "None, every sensor reported", "No reading is missing", "Nothing is missing"]))],
                         k=ctx.r.randint(3, 4)))
    else:
        q = ctx.r.choice(present)
        qs.append(extract(ctx, ctx.v(["What {l} was recorded for the {p}?", "What is the reading of the {p}?",
                                      "Which value did the {p} report?", "What does the {p} show?"]).format(l=label, p=q[0]),
                          "%d %s" % (q[1], unit), ["%d %s" % (vv, unit) for pp, vv in present if pp != q[0]] + ["%d %s" % (limit, unit)],
                          k=ctx.r.randint(3, 5)))
    return ev, qs


def fam_scheduling(ctx):
    who = [first(ctx) for _ in range(3)]
    who = list(dict.fromkeys(who))
    day0, day1 = ctx.r.sample(WEEKDAY[:5], 2)
    h0, h1 = ctx.r.sample([8, 9, 10, 11, 13, 14, 15, 16, 17], 2)
    room0, room1 = ctx.pick(ROOM, 2)
    moved = ctx.coin(0.4)
    cancelled = not moved and ctx.coin(0.5)
    topic = ctx.slot(ctx.v(["budget review", "design sync", "onboarding session", "quarterly planning", "vendor call",
                            "safety briefing", "sprint demo", "interview panel", "client workshop", "team retro",
                            "training on the new tool", "lease negotiation"]))
    clock = lambda h: ctx.v(["%d:00", "%02d:00", "%d:00", "%d.00"]) % h if h <= 12 else ctx.v(["%d:00", "%02d:00", "%d:00", "%d.00"]) % h
    lines = []
    lines.append(ctx.v(["The {t} is booked for {d} at {h} in {r}.", "{t}: {d}, {h}, {r}.",
                        "We have {r} on {d} at {h} for the {t}.", "Booking confirmed - {t}, {d} {h}, {r}.",
                        "Reminder: {t} on {d} at {h} ({r})."]).format(t=topic, d=day0, h=clock(h0), r=room0))
    if moved:
        lines.append(ctx.v(["Update: it has moved to {d} at {h}, not {d0}.", "Change of plan: the {t} is now on {d} at {h} in {r}.",
                            "Please note the new slot: {d}, {h}. The {d0} booking is released.",
                            "It was rescheduled to {d} {h} because {w} is away on {d0}.",
                            "Moved: {d} at {h} instead."]).format(d=day1, h=clock(h1), d0=day0, t=topic, r=room1, w=who[0]))
    elif cancelled:
        lines.append(ctx.v(["Update: the {t} is cancelled and will not be rescheduled.", "Cancelled - no new date.",
                            "We have called off the {t}.", "The {t} will not take place.",
                            "Cancelled by {w}."]).format(t=topic, w=who[0]))
    att = who[:2] if len(who) >= 2 else who
    absent = who[2] if len(who) > 2 else None
    lines.append(ctx.v(["Attending: {a}.", "{a} will join.", "Invited: {a}.", "{a} confirmed.", "Participants: {a}."]).format(a=" and ".join(att)))
    if absent:
        lines.append(ctx.v(["{x} cannot make it.", "{x} declined.", "{x} will not attend.", "{x} is on leave and won't come.",
                            "No reply from {x} - counts as not attending."]).format(x=absent))
    style = ctx.v(["msg", "bullets", "email", "msg2", "bullets2", "email2", "msg3", "bullets3"])
    if style.startswith("bullets"):
        ev = "\n".join("- " + l for l in lines)
    elif style.startswith("email"):
        ev = "From: %s\nSubject: %s\n\n%s" % (person(ctx), topic.capitalize(), " ".join(lines))
    else:
        ev = " ".join(lines)
    qs = []
    fday = day1 if moved else day0
    if not cancelled:
        qs.append(ordinal(ctx, ctx.v(["On which day does the {t} take place?", "What day is the {t} now?",
                                      "When is the {t} happening (day)?", "Which day should attendees keep free?"]).format(t=topic),
                          [(d.lower(), d) for d in WEEKDAY[:5]], fday.lower()))
        fh = h1 if moved else h0
        hs = sorted(set([h0, h1, fh + 1 if fh < 17 else fh - 2]))
        qs.append(extract(ctx, ctx.v(["At what time does it start?", "What is the start time?", "When does the {t} begin?",
                                      "Which time is the {t} set for?"]).format(t=topic),
                          "%d:00" % fh, ["%d:00" % h for h in hs], k=len(hs)))
    qs.append(yes_no(ctx, ctx.v(["Will the {t} still take place?", "Is the {t} going ahead?", "Is the meeting still on?",
                                 "Does the {t} happen at all?"]).format(t=topic), not cancelled))
    if absent and ctx.coin():
        qs.append(yes_no(ctx, ctx.v(["Will {x} attend?", "Is {x} coming?", "Does {x} take part?", "Will {x} be there?"]).format(x=absent), False))
    elif att:
        x = ctx.r.choice(att)
        qs.append(yes_no(ctx, ctx.v(["Will {x} attend?", "Is {x} coming?", "Does {x} take part?", "Will {x} be there?"]).format(x=x), True))
    if moved and ctx.coin():
        qs.append(yes_no(ctx, ctx.v(["Is the {t} still on {d}?", "Does the {t} happen on {d} as first booked?",
                                     "Is {d} still the day of the {t}?", "Will the {t} be held on {d}?"]).format(t=topic, d=day0), False))
    return ev, qs


def fam_job_application(ctx):
    cand = person(ctx)
    role = ctx.pick(ROLE)
    need_years = ctx.r.randint(2, 8)
    years = ctx.r.randint(0, 12)
    skills_req = ctx.pick(SKILL, 2)
    has = [s for s in skills_req if ctx.coin(0.6)]
    cand_skills = has + [s for s in ctx.pick(SKILL, 5) if s not in skills_req][:ctx.r.randint(1, 3)]
    ctx.r.shuffle(cand_skills)
    budget = ctx.num(30, 120) * 1000
    ask = ctx.r.choice([budget - ctx.num(2, 15) * 1000, budget + ctx.num(2, 25) * 1000])
    ask_stated = ctx.coin(0.8)
    city = ctx.pick(CITY)
    cand_city = city if ctx.coin() else ctx.pick(CITY)
    relocate = ctx.r.choice(["yes", "no", "unknown"]) if cand_city != city else "n/a"
    post = ctx.v(["Opening: {r} in {c}. Requirements: at least {y} years of experience; {s}. Budget: up to {b} per year.",
                  "We are hiring a {r} ({c} office). Must have: {y}+ years experience, {s}. Salary band tops out at {b}.",
                  "Role: {r}, based in {c}. Minimum {y} years in a similar role. Required skills: {s}. Max salary {b}.",
                  "Job ad - {r} ({c}). You bring {y} or more years of experience and {s}. We pay up to {b} a year.",
                  "{r} wanted in {c}: {y}+ years, {s}; budget {b}."]).format(r=role, c=city, y=need_years,
                                                                             s=" and ".join(skills_req), b="{:,}".format(budget))
    cv = ctx.v(["Candidate: {n}. {yy} years as a {r}. Skills: {sk}. Lives in {cc}.{rel}{ask}",
                "{n} has worked {yy} years in this field and lists {sk}. Based in {cc}.{rel}{ask}",
                "Application from {n} ({cc}): experience {yy} years; skills {sk}.{rel}{ask}",
                "CV summary - {n}, {cc}. Experience: {yy} yrs. Skills: {sk}.{rel}{ask}",
                "{n}, currently in {cc}, brings {yy} years of experience and knows {sk}.{rel}{ask}"])
    rel = {"yes": ctx.v([" Willing to relocate.", " Happy to move.", " Open to relocation.", " Would relocate."]),
           "no": ctx.v([" Not willing to relocate.", " Will not move.", " Cannot relocate.", " Relocation is not an option."]),
           "unknown": "", "n/a": ""}[relocate]
    askt = (" " + ctx.v(["Expects {a} per year.", "Salary expectation: {a}.", "Asks for {a}.", "Wants {a} a year."]).format(
        a="{:,}".format(ask))) if ask_stated else ""
    ev = post + "\n\n" + cv.format(n=cand, yy=years if years != 1 else 1, r=role, sk=", ".join(cand_skills), cc=cand_city,
                                   rel=rel, ask=askt)
    missing = (years < need_years) + (len(has) < 2)
    qs = []
    qs.append(yes_no(ctx, ctx.v(["Does the candidate meet the experience requirement?", "Has the candidate enough years of experience?",
                                 "Is the candidate experienced enough for the role?", "Does the experience meet the minimum?"]),
                     years >= need_years))
    s = ctx.r.choice(skills_req)
    qs.append(yes_no(ctx, ctx.v(["Does the candidate list {s}?", "Does the candidate have {s}?", "Is {s} among the candidate's skills?",
                                 "Can the candidate offer {s}?"]).format(s=s), s in cand_skills))
    lv = [("all", ctx.v(["Meets all requirements", "Fully qualified", "Meets every requirement", "All requirements met"])),
          ("one", ctx.v(["Misses one requirement", "One requirement not met", "Falls short on one point", "Lacks one requirement"])),
          ("several", ctx.v(["Misses several requirements", "Two or more requirements not met", "Falls short on several points",
                             "Lacks multiple requirements"]))]
    ans = ["all", "one", "several"][min(missing, 2)]
    qs.append(ordinal(ctx, ctx.v(["How well does the candidate match the requirements (experience and skills)?",
                                  "Overall, does the candidate meet the requirements?", "Rate the fit against the listed requirements.",
                                  "How many requirements does the candidate miss?"]), lv, ans))
    qs.append(yes_no(ctx, ctx.v(["Is the candidate's salary expectation within the budget?", "Does the asked salary fit the budget?",
                                 "Can the company afford the candidate's expectation?", "Is the expected pay at or below the budget?"]),
                     ask <= budget, stated=ask_stated))
    if relocate != "n/a":
        qs.append(yes_no(ctx, ctx.v(["Is the candidate willing to relocate?", "Would the candidate move for the job?",
                                     "Is relocation acceptable to the candidate?", "Will the candidate relocate?"]),
                         relocate == "yes", stated=relocate != "unknown"))
    return ev, qs


def fam_incident_report(ctx):
    svc = ctx.pick(SERVICE)
    cause = ctx.r.choice(["config", "hardware", "network", "bug", "capacity", "human"])
    dur = ctx.r.choice([ctx.num(2, 9), ctx.num(10, 300)])
    users = ctx.r.choice(["none", "some", "all"])
    resolved = ctx.r.choice(["yes", "no", "mitigated"])
    start_h, start_m = ctx.r.randint(0, 23), ctx.r.randint(0, 59)
    sev = "sev1" if users == "all" and dur >= 30 else "sev2" if users != "none" else "sev3"
    cause_txt = {"config": ctx.v(["a bad configuration change pushed at {t}", "a wrong value in a config file",
                                  "a misconfigured feature flag", "an incorrect load balancer setting", "a typo in the deploy config"]),
                 "hardware": ctx.v(["a failed disk on the primary node", "a power supply failure in the rack",
                                    "a broken memory module", "an overheating server", "a dead network card"]),
                 "network": ctx.v(["packet loss between data centres", "a provider's network outage", "a DNS resolution failure",
                                   "a routing change upstream", "a saturated network link"]),
                 "bug": ctx.v(["a software bug in release {v}", "a null pointer error in the new code", "a race condition in version {v}",
                               "a regression shipped in {v}", "a memory leak introduced in {v}"]),
                 "capacity": ctx.v(["traffic three times above normal", "the database running out of connections",
                                    "a full disk on the log volume", "too many requests during the sale", "exhausted worker threads"]),
                 "human": ctx.v(["an engineer deleting the wrong table", "a manual restart of the wrong cluster",
                                 "an operator running a script against production by mistake", "someone unplugging the wrong cable",
                                 "an accidental rollback by on-call"])}[cause].format(t="%02d:%02d" % (start_h, start_m),
                                                                                      v="%d.%d" % (ctx.r.randint(1, 9), ctx.r.randint(0, 30)))
    red_herring = ctx.v(["Network was checked first and was fine.", "Initially we suspected the database, which was healthy.",
                         "A disk alert fired but was unrelated.", "The CDN looked suspicious at first but was not involved.",
                         "No hardware faults were found."]) if ctx.coin(0.5) else ""
    impact = {"none": ctx.v(["No customers were affected.", "Customer impact: none.", "Users did not notice anything.",
                             "No user-facing impact."]),
              "some": ctx.v(["About a fifth of users saw errors.", "Some customers in one region were affected.",
                             "Impact: partial, a minority of requests failed.", "A subset of users could not log in."]),
              "all": ctx.v(["All customers were affected.", "The service was down for everyone.", "Full outage for all users.",
                            "Every request failed."])}[users]
    res = {"yes": ctx.v(["Resolved: the fix is deployed and the service is healthy.", "Status: resolved.",
                         "The incident is closed.", "Fully recovered."]),
           "no": ctx.v(["Status: ongoing, engineers are still working on it.", "Not resolved yet.",
                        "The issue is still open.", "Still investigating; no fix yet."]),
           "mitigated": ctx.v(["Mitigated with a workaround; the permanent fix is pending.", "Status: mitigated, root fix to follow.",
                               "Traffic was rerouted as a stopgap; a real fix is not deployed yet.", "Workaround in place."])}[resolved]
    style = ctx.v(["postmortem", "timeline", "summary", "postmortem2", "timeline2", "summary2", "postmortem3", "timeline3"])
    if style.startswith("postmortem"):
        ev = "Incident report: %s\nStart: %02d:%02d  Duration: %d minutes\nCause: %s.\n%s %s\n%s" % (
            svc, start_h, start_m, dur, cause_txt, impact, red_herring, res)
    elif style.startswith("timeline"):
        ev = "%02d:%02d %s errors start\n+%d min: root cause found - %s\n%s %s\n%s" % (start_h, start_m, svc, dur, cause_txt,
                                                                                        impact, red_herring, res)
    else:
        ev = "The %s had problems for %d minutes, caused by %s. %s %s %s" % (svc, dur, cause_txt, impact, red_herring, res)
    ev = ev.replace("  ", " ").replace(" \n", "\n")
    cdesc = {"config": ctx.v(["A configuration change", "Misconfiguration", "A config error", "Wrong settings"]),
             "hardware": ctx.v(["Hardware failure", "A broken physical component", "Failed hardware", "A hardware fault"]),
             "network": ctx.v(["A network problem", "Network failure", "Connectivity issue", "Network outage"]),
             "bug": ctx.v(["A software bug", "Defect in the code", "A bug in a release", "Faulty software"]),
             "capacity": ctx.v(["Overload or lack of capacity", "Capacity exhausted", "Too much load", "Resource exhaustion"]),
             "human": ctx.v(["Human error", "A mistake by a person", "Operator error", "Someone's manual mistake"])}
    qs = []
    qs.append(choice(ctx, ctx.v(["What was the root cause of the incident?", "What caused the outage?", "Why did the incident happen?",
                                 "Which cause is given for the incident?"]), (cause, cdesc[cause]),
                     [(k, v) for k, v in cdesc.items() if k != cause]))
    qs.append(choice(ctx, ctx.v(["Is the incident resolved?", "What is the current status?", "Has the problem been fixed?",
                                 "Where does the incident stand now?"]),
                     (resolved, {"yes": "Resolved", "no": "Still ongoing", "mitigated": "Mitigated with a workaround only"}[resolved]),
                     [(k, v) for k, v in {"yes": ctx.v(["Resolved", "Fixed", "Closed", "Fully fixed"]),
                                          "no": ctx.v(["Still ongoing", "Open", "Not fixed", "Unresolved"]),
                                          "mitigated": ctx.v(["Mitigated with a workaround only", "Worked around", "Temporarily mitigated",
                                                              "Workaround, no permanent fix"])}.items() if k != resolved], k=3))
    sv = [("sev3", ctx.v(["Sev 3: no customer impact", "Low severity", "Minor (no users affected)", "Sev 3"])),
          ("sev2", ctx.v(["Sev 2: some customers affected", "Medium severity", "Major (part of the users)", "Sev 2"])),
          ("sev1", ctx.v(["Sev 1: all customers affected for 30 minutes or more", "High severity", "Critical (everyone, long)", "Sev 1"]))]
    qs.append(ordinal(ctx, ctx.v(["Which severity fits this incident?", "How severe was the incident?", "Assign a severity level.",
                                  "What severity should be recorded?"]), sv, sev))
    thr = ctx.num(10, 200)
    if thr != dur:
        qs.append(yes_no(ctx, ctx.v(["Did the incident last longer than {m} minutes?", "Was the outage over {m} minutes?",
                                     "Did it take more than {m} minutes?", "Is the duration above {m} minutes?"]).format(m=thr), dur > thr,
                         stated=not style.startswith("timeline") or True))
    return ev, qs


QA = [  # (question, reference parts, wrong alternatives); the parts are what a correct answer must name
    ("Which two gases make up most of the air?", ["nitrogen", "oxygen"], ["carbon dioxide", "argon", "hydrogen"]),
    ("Name the two ingredients of the house dressing.", ["olive oil", "lemon juice"], ["vinegar", "mustard", "honey"]),
    ("Which two cities does the night train connect?", ["{c1}", "{c2}"], ["{c3}", "{c4}"]),
    ("What are the two colours of the {b} logo?", ["green", "white"], ["red", "blue", "black"]),
    ("Which two documents must a new hire bring?", ["passport", "tax form"], ["diploma", "bank letter", "photo"]),
    ("Which two metals make bronze?", ["copper", "tin"], ["iron", "zinc", "lead"]),
    ("Which two days is the {b} shop closed?", ["Monday", "Tuesday"], ["Sunday", "Friday", "Saturday"]),
    ("Name the two planets closest to the Sun.", ["Mercury", "Venus"], ["Mars", "Earth", "Jupiter"]),
    ("What two things does the warranty cover?", ["battery", "screen"], ["water damage", "charger", "case"]),
    ("Which two people lead the {b} project?", ["{p1}", "{p2}"], ["{p3}", "{p4}"]),
    ("What two skills does the course teach?", ["budgeting", "negotiation"], ["coding", "welding", "drawing"]),
    ("Which two rivers meet in the city of {c1}?", ["the Vell", "the Orra"], ["the Tams", "the Lune"]),
]
NUMQA = [("How many sides does a {n}-sided polygon have?", None),
         ("What is {a} plus {b}?", "add"), ("What is {a} times {b}?", "mul"), ("What is {a} minus {b}?", "sub")]


def fam_answer_grading(ctx):
    if ctx.coin(0.6):
        q, parts, wrong = ctx.v(QA)
        cs, ps = ctx.pick(CITY, 4), ctx.pick(LAST, 4)
        fill = {"c1": cs[0], "c2": cs[1], "c3": cs[2], "c4": cs[3], "b": ctx.pick(BRAND),
                "p1": "%s %s" % (first(ctx), ps[0]), "p2": "%s %s" % (first(ctx), ps[1]),
                "p3": "%s %s" % (first(ctx), ps[2]), "p4": "%s %s" % (first(ctx), ps[3])}
        q = q.format(**fill)
        parts = [p.format(**fill) for p in parts]
        wrong = [w.format(**fill) for w in wrong if w.format(**fill) not in parts]
        ctx.slot((parts, wrong))  # the grade compares the student's words with these: never paraphrased
        grade = ctx.r.choice(["correct", "partial", "incorrect"])
        if grade == "correct":
            said = parts[:]
            ctx.r.shuffle(said)
        elif grade == "partial":
            said = [ctx.r.choice(parts), ctx.r.choice(wrong)] if ctx.coin() else [ctx.r.choice(parts)]
        else:
            said = ctx.r.sample(wrong, min(2, len(wrong))) if ctx.coin() else [ctx.r.choice(wrong)]
        ref = " and ".join(parts)
        stud = ctx.v(["{x}.", "I think it is {x}.", "{x}, I believe.", "The answer is {x}.", "It's {x}!",
                      "Probably {x}.", "My answer: {x}.", "{x} - not 100% sure."]).format(x=" and ".join(said))
        if grade == "incorrect" and ctx.coin(0.3):
            stud = ctx.v(["I don't know.", "No idea, sorry.", "I forgot this one.", "Skipped."])
        levels = [("correct", ctx.v(["Correct: both parts named", "Correct", "Fully correct", "Correct, complete answer"])),
                  ("partial", ctx.v(["Partially correct: one part named", "Partially correct", "Half right", "Partly correct"])),
                  ("incorrect", ctx.v(["Incorrect: no part named", "Incorrect", "Wrong", "Not correct at all"]))]
    else:
        a, b = ctx.r.randint(2, 40), ctx.r.randint(2, 12)
        qt, op = ctx.v(NUMQA[1:])
        if op == "sub" and b > a:
            a, b = b, a
        val = {"add": a + b, "mul": a * b, "sub": a - b}[op]
        q = qt.format(a=a, b=b)
        ref = str(val)
        grade = ctx.r.choice(["correct", "incorrect", "incorrect"])
        ans = val if grade == "correct" else val + ctx.r.choice([-10, -2, -1, 1, 2, 10])
        stud = ctx.v(["{x}", "It is {x}.", "{x}, I think.", "The result is {x}.", "= {x}", "{x}!", "I got {x}.", "{x} I believe"]).format(x=ans)
        levels = [("correct", ctx.v(["Correct", "Correct", "Right", "The answer is correct"])),
                  ("incorrect", ctx.v(["Incorrect", "Incorrect", "Wrong", "The answer is wrong"]))]
    style = ctx.v(["qa", "exam", "inline", "qa2", "exam2", "inline2", "qa3", "exam3"])
    if style.startswith("qa"):
        ev = "Question: %s\nReference answer: %s.\nStudent answer: %s" % (q, ref, stud)
    elif style.startswith("exam"):
        ev = "Q%d. %s\n[Key] %s\n[%s] %s" % (ctx.r.randint(1, 20), q, ref, first(ctx), stud)
    else:
        ev = "The question was \"%s\" The expected answer is %s. The student wrote: \"%s\"" % (q, ref, stud)
    qs = [ordinal(ctx, ctx.v(["How should the student answer be graded?", "Grade the student's answer.",
                              "Is the student answer correct?", "Which grade does the answer deserve?"]), levels, grade)]
    return ev, qs


DOCS = {
    "invoice": ["INVOICE No. {n}\nBill to: {p}\n{k} x {it} ... {m}\nTotal due: {m} by {d}.",
                "{c} Ltd - invoice {n}. Amount payable: {m}. Payment terms: 30 days.",
                "Tax invoice {n} for services rendered to {p}: {m} incl. VAT.",
                "Please pay {m} for invoice {n} ({it}) to account ending {k}{k}{k}."],
    "minutes": ["MINUTES - {c} committee, {d}\nPresent: {p}, {q}\n1. Budget approved.\n2. Next meeting on {d2}.",
                "Meeting notes {d}. Attendees: {p}, {q}. Decisions: the {it} purchase was postponed. Actions: {q} to send quotes.",
                "Summary of the {c} board meeting held {d}: present {p} (chair) and {q}; the motion carried.",
                "Minutes of the staff meeting, {d}. {p} opened the meeting. Item 1: holiday rota agreed."],
    "contract": ["This Agreement is made on {d} between {c} Ltd (\"Supplier\") and {p} (\"Client\"). The Supplier shall deliver {it}.",
                 "SERVICE CONTRACT\nParties: {c} and {p}\nTerm: 12 months from {d}\nThe Client agrees to pay {m} per month.",
                 "Both parties agree to the following terms. 1. The lease starts on {d}. 2. Rent is {m}. Signed: {p}.",
                 "The Contractor undertakes to complete the work by {d2}. Governing law: the laws of {ci}."],
    "press": ["FOR IMMEDIATE RELEASE\n{c} launches the new {it} in {ci}. \"We are thrilled,\" said CEO {p}.",
              "{ci}, {d} - {c} today announced record results and the opening of a new office.",
              "Press release: {c} partners with {q}'s foundation to bring the {it} to schools.",
              "NEWS: {c} names {p} as its new chief executive, effective {d}."],
    "job": ["We're hiring! {c} is looking for a {r} in {ci}. Apply by {d}.",
            "Job posting: {r} (full time). Requirements: 3+ years experience. Send your CV to {q}.",
            "Vacancy - {r} at {c}. Salary {m}. Closing date {d}.",
            "Join our team as a {r}! Flexible hours, based in {ci}."],
    "recipe": ["Ingredients: 2 eggs, 200 g flour, 1 cup milk. Whisk, rest 10 minutes, fry in butter.",
               "{p}'s lentil soup: soften an onion, add lentils and stock, simmer 25 minutes, season.",
               "Preheat the oven to 180 C. Mix sugar and butter, fold in the flour, bake for 35 minutes.",
               "Serves 4. Chop the vegetables, stir-fry for 5 minutes, add soy sauce and serve with rice."],
    "error_log": ["{d} 03:12:44 ERROR [db-pool] connection refused (attempt 3/5)\n{d} 03:12:49 WARN retrying",
                  "Traceback (most recent call last):\n  File \"app.py\", line 42, in run\nKeyError: 'user_id'",
                  "[FATAL] service {s} exited with code 137 (out of memory) at 14:02",
                  "E0412 kubelet: failed to pull image registry/{s}:latest: not found"],
    "receipt": ["{c} STORE #{k}\n{it}  {m}\nCARD ****{k}{k}{k}{k}\nTHANK YOU FOR SHOPPING",
                "Receipt - {d}\n1 x {it} {m}\nPaid: cash\nChange: 0.00",
                "Your receipt from {c}: {it}, {m}, paid by card on {d}.",
                "Thanks for your purchase! Order total {m}. Keep this receipt for returns."],
    "shipping": ["Your parcel from {c} has been dispatched. Tracking number: {n}. Expected delivery: {d}.",
                 "Shipping notice: order {n} left our warehouse in {ci} and is on its way to {p}.",
                 "Good news - your {it} is out for delivery today.",
                 "Dispatch confirmation {n}: 2 boxes, courier pickup {d}."],
    "memo": ["MEMO\nTo: all staff\nFrom: {p}\nRe: new expense policy\nFrom {d}, receipts are required for all claims.",
             "Internal memo: the office in {ci} will be closed on {d} for maintenance.",
             "To: managers. From: HR. Subject: updated leave rules. Please read before {d}.",
             "Memorandum - parking changes effective {d}. Contact {q} with questions."],
}
DOC_DESC = {"invoice": ["An invoice", "A bill asking for payment", "Invoice", "A request for payment (invoice)"],
            "minutes": ["Minutes of a meeting", "Meeting minutes", "A record of a meeting", "Notes from a meeting"],
            "contract": ["A contract or agreement", "A contract", "A legal agreement", "Terms agreed between parties"],
            "press": ["A press release", "A news announcement", "Press release", "A company announcement to the press"],
            "job": ["A job posting", "A job advertisement", "Vacancy notice", "A hiring ad"],
            "recipe": ["A recipe", "Cooking instructions", "Recipe", "How to cook a dish"],
            "error_log": ["Error log output", "A log of software errors", "System log", "Machine error messages"],
            "receipt": ["A receipt for a purchase", "A shop receipt", "Receipt", "Proof of payment"],
            "shipping": ["A shipping notification", "A delivery notice", "Dispatch notice", "Parcel tracking update"],
            "memo": ["An internal memo", "A memo to staff", "Memo", "An internal announcement"]}


def fam_doc_labeling(ctx):
    kind = ctx.r.choice(sorted(DOCS))
    fill = {"n": "%d" % ctx.num(1000, 99999), "p": person(ctx), "q": person(ctx), "c": ctx.pick(COMPANY), "ci": ctx.pick(CITY),
            "d": date(ctx), "d2": date(ctx), "it": ctx.pick(PRODUCT), "m": "€%d.00" % ctx.num(10, 9000), "k": str(ctx.r.randint(1, 9)),
            "r": ctx.pick(ROLE), "s": ctx.r.choice(["auth", "billing", "api", "worker", "search"])}
    ev = ctx.v(DOCS[kind]).format(**fill)
    qs = [choice(ctx, ctx.v(["What type of document is this?", "What kind of text is this?", "Classify this document.",
                             "Which label fits this document?", "What is this document?"]),
                 (kind, ctx.v(DOC_DESC[kind])), [(k, ctx.v(v)) for k, v in DOC_DESC.items() if k != kind])]
    money_kinds = {"invoice", "receipt"}
    if kind in money_kinds:
        qs.append(yes_no(ctx, ctx.v(["Does the document ask the reader to pay money?", "Is this a request for payment?",
                                     "Does the reader owe money according to this document?", "Does it demand a payment?"]),
                         kind == "invoice"))
    else:
        other = kind if ctx.coin() else ctx.r.choice([k for k in sorted(DOCS) if k != kind])
        qs.append(yes_no(ctx, ctx.v(["Is this document {d}?", "Would you label this text as {d}?", "Is the text {d}?",
                                     "Does this look like {d}?"]).format(d=ctx.v(DOC_DESC[other]).lower()), other == kind))
    return ev, qs


def fam_shipment_tracking(ctx):
    """The adapter's family: parcel tracking histories (never seen by the base models)."""
    carrier = ctx.v(["ParcelNet", "SwiftPost", "EuroLink Freight", "Courio", "PakExpress", "BlueRoute", "Transa", "Shipmo"])
    n_ev = ctx.r.randint(2, 5)
    cities = ctx.pick(CITY, n_ev)
    final = ctx.r.choice(["delivered", "transit", "exception", "returned"])
    promised_day = ctx.r.randint(3, 26)
    mon = ctx.pick(MONTH)
    days = sorted(ctx.r.sample(range(1, 28), n_ev))
    evs = []
    for i, (c, d) in enumerate(zip(cities, days)):
        if i == 0:
            s = ctx.v(["Picked up", "Accepted at depot", "Shipment received", "Collected from sender"])
        elif i < n_ev - 1:
            s = ctx.v(["Departed facility", "In transit", "Arrived at hub", "Processed at sort centre"])
        else:
            s = {"delivered": ctx.v(["Delivered - signed by %s" % first(ctx), "Delivered to front door", "Delivered",
                                     "Handed to recipient"]),
                 "transit": ctx.v(["Out for delivery", "In transit to destination", "Departed hub", "Arrived at local depot"]),
                 "exception": ctx.v(["Delivery failed - address not found", "Held at customs", "Damaged in transit, on hold",
                                     "Exception: recipient unavailable"]),
                 "returned": ctx.v(["Returned to sender", "Return to sender initiated", "Sent back - refused by recipient",
                                    "Returning to origin"])}[final]
        evs.append((d, c, s))
    style = ctx.v(["table", "lines", "prose", "table2", "lines2", "prose2", "table3", "lines3"])
    trk = "%s%d" % (ctx.r.choice(["PN", "SP", "EL", "CX"]), ctx.num(100000, 999999))
    head = "%s tracking %s - promised delivery: %d %s" % (carrier, trk, promised_day, mon)
    if style.startswith("table"):
        body = "\n".join("%2d %s | %-12s | %s" % (d, mon[:3], c, s) for d, c, s in reversed(evs))
    elif style.startswith("lines"):
        body = "\n".join("%d %s, %s: %s" % (d, mon, c, s) for d, c, s in evs)
    else:
        body = " ".join("On %d %s the parcel was in %s (%s)." % (d, mon, c, s.lower()) for d, c, s in evs)
    ev = head + "\n" + body
    qs = []
    sd = {"delivered": ctx.v(["Delivered", "It has been delivered", "Delivered to the recipient", "Arrived and handed over"]),
          "transit": ctx.v(["Still on its way", "In transit", "Not yet delivered, moving", "On the way"]),
          "exception": ctx.v(["Stuck with a delivery problem", "Exception / on hold", "Delivery problem", "Held up"]),
          "returned": ctx.v(["Going back to the sender", "Returned", "Being returned", "Sent back"])}
    qs.append(choice(ctx, ctx.v(["What is the current status of the parcel?", "Where does the shipment stand?",
                                 "Has the parcel arrived?", "What happened to the parcel last?"]),
                     (final, sd[final]), [(k, v) for k, v in sd.items() if k != final]))
    last_c = evs[-1][1]
    qs.append(choice(ctx, ctx.v(["Where was the parcel last scanned?", "In which city is the latest event?",
                                 "What is the last known location?", "Which place appears in the newest scan?"]),
                     ("v1", last_c), [("v%d" % (i + 2), c) for i, c in enumerate([c for c in cities if c != last_c] +
                                                                             [c for c in ctx.pick(CITY, 2) if c not in cities])],
                     k=ctx.r.randint(2, 4)))
    if final == "delivered":
        late = evs[-1][0] > promised_day
        qs.append(yes_no(ctx, ctx.v(["Was the parcel delivered late?", "Did delivery happen after the promised date?",
                                     "Was the promised date missed?", "Did it arrive later than promised?"]), late))
    else:
        qs.append(yes_no(ctx, ctx.v(["Has the parcel been delivered?", "Did the recipient get the parcel?",
                                     "Is the delivery complete?", "Was it delivered?"]), False))
    qs.append(extract(ctx, ctx.v(["How many tracking events are listed?", "How many scans does the history show?",
                                  "Count the tracking entries.", "How many status updates are there?"]),
                      n_ev, [n_ev + 1, n_ev - 1, n_ev + 2], k=ctx.r.randint(3, 4)))
    return ev, qs


FAMILIES = {f: globals()["fam_" + f] for f in BASE_FAMILIES + [ADAPTER_FAMILY]}


# ----------------------------------------------------------------------------------------------- augmentation
P_EVIDENCE, P_QUESTION, P_OPTION, P_FRAME = 0.6, 0.5, 0.3, 0.25   # per group / per question / per option
RATE = 0.55                                                       # per table phrase found in a chosen text
_SLOT = re.compile(r"\{[^{}]*\}|%[-+0#]*\d*(?:\.\d+)?[sdfr]|\d+")   # {slot}, %s, digits
_WORD = re.compile(r"[a-z0-9]+")
KEY = 12   # a test-only fragment is a literal piece of >= 12 characters
_WORDINGS = {}


def _norm(s):
    return " ".join(s.lower().split())


def _trim(s):
    return re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", s)


def _wordings(variant):
    """What a test-only variant looks like inside a text: (fragments, template).
    fragments: its literal pieces between {slots} (%s, digits), lower-case, whitespace normalised, trimmed of
    punctuation, of >= 12 characters; a variant without slots of two or more words ("Sent back") is one too.
    template: for a variant whose pieces are all shorter ("Wants {a} a year."): (a word of it, a regex of it with
    the slots matching anything), else None."""
    w = _WORDINGS.get(variant)
    if w is None:
        pieces = _SLOT.split(variant)
        for i, p in enumerate(pieces):
            if i > 0 and p[:1].isalnum():          # "{n}-sided": a word glued to a slot belongs to it
                p = re.sub(r"^\w+", "", p)
            if i < len(pieces) - 1 and p[-1:].isalnum():
                p = re.sub(r"\w+$", "", p)
            pieces[i] = _norm(p)
        frags = [_trim(p) for p in pieces if len(_trim(p)) >= KEY]
        if len(pieces) == 1 and len(_WORD.findall(pieces[0])) >= 2 and not frags:
            frags = [_trim(pieces[0])]
        tpl = None
        lit = [p for p in pieces if p]
        if len(pieces) > 1 and not frags and sum(bool(re.search("[a-z]", p)) for p in lit) >= 2:
            rx = r"(?<![a-z0-9])" + r".{1,60}?".join(re.escape(p) for p in lit)
            anchor = max(re.findall("[a-z]{3,}", " ".join(lit)) or [""], key=len)
            if anchor:
                tpl = (anchor, re.compile(rx))
        _WORDINGS[variant] = w = (tuple(frags), tpl)
    return w


class Guard:
    """The test-only wordings a training text must not contain (see _wordings): fragments as substrings (those
    under 12 characters as whole words), templates, and, for short variants ("Unresolved"), the whole text."""

    def __init__(self, variants):
        self.variants = frozenset(variants)
        self.words, self.whole, self.memo = {}, set(), {}   # word -> (fragments starting with it, templates)
        for v in self.variants:
            self.whole.add(_trim(_norm(v)))
            frags, tpl = _wordings(v)
            for f in frags:
                self.words.setdefault(_WORD.match(f).group(), (set(), set()))[0].add(f)
            if tpl:
                self.words.setdefault(tpl[0], (set(), set()))[1].add(tpl[1])

    def found(self, text):
        """The test-only wordings in text (memoised: questions and options repeat)."""
        if not self.words:
            return frozenset()
        hit = self.memo.get(text)
        if hit is None:
            t, hit, rxs = _norm(text), set(), set()
            for m in _WORD.finditer(t):
                w = self.words.get(m.group())
                if w is None:
                    continue
                for f in w[0]:
                    e = m.start() + len(f)
                    if t.startswith(f, m.start()) and (len(f) >= KEY or not t[e:e + 1].isalnum()):
                        hit.add(f)
                rxs.update(w[1])
            hit.update(rx.pattern for rx in rxs if rx.search(t))
            if len(self.memo) > 100000:
                self.memo.clear()
            self.memo[text] = hit = frozenset(hit)
        return hit

    def adds(self, new, old):
        """Whether the rewrite `new` of `old` brings in a test-only wording that `old` does not have."""
        if _trim(_norm(new)) in self.whole:
            return True
        f = self.found(new)
        return bool(f) and not f <= self.found(old)


_CENSUS = None


def census_guard():
    """Every test-only variant the families choose from, found once per process by running each family on fixed
    seeds (deterministic: the same in every worker). A group's own Ctx only knows the lists it chose from; this
    also keeps a rewrite from producing a test-only wording of another list ("Not mentioned" is one of
    order_invoice's, "stated" -> "mentioned" happens everywhere)."""
    global _CENSUS
    if _CENSUS is None:
        seen = set()
        for fam in sorted(FAMILIES):
            for i in range(300):
                ctx = Ctx(random.Random("census/%s/%d" % (fam, i)), "train")
                make_group(ctx, fam, "census")
                seen |= ctx.test_wordings
        _CENSUS = Guard(seen)
    return _CENSUS


def augment(ctx, ev, qs):
    """Paraphrased evidence (P_EVIDENCE, once for the group), questions (P_QUESTION, plus a frame P_FRAME) and
    option descriptions (P_OPTION each); all draws from ctx.r. A rewrite that brings in a test-only wording (one
    the original text does not already contain), or that makes two options of a question read the same, is
    dropped for the original."""
    glob = census_guard()
    own = Guard(ctx.test_wordings - glob.variants)  # formatted ones ("Issue with Taskly"); mostly none

    def clean(new, old):
        return new if new == old or not (own.adds(new, old) or glob.adds(new, old)) else old

    def para(text, p, please=True):
        if not ctx.coin(p):
            return text
        return clean(paraphrase(text, ctx.r, RATE, ctx.slots, please=please), text)

    ev = para(ev, P_EVIDENCE)
    out = []
    for q in qs:
        question = para(q["question"], P_QUESTION)
        if ctx.coin(P_FRAME):
            framed = frame_question(question, ctx.r)
            if framed:
                question = clean(framed, question)
        opts = [{"id": o["id"], "description": para(o["description"], P_OPTION, please=False)} for o in q["options"]]
        if len({_norm(o["description"]) for o in opts}) < len(opts):
            opts = q["options"]
        out.append({"question": question, "options": opts, "answer": q["answer"]})
    return ev, out


def make_group(ctx, family, gid, max_q=4, augmented=False):
    ev, qs = FAMILIES[family](ctx)
    ctx.r.shuffle(qs)
    qs = qs[:ctx.r.randint(1, min(max_q, len(qs)))]
    if augmented:
        ev, qs = augment(ctx, ev, qs)
    rows = []
    for j, q in enumerate(qs):
        rows.append({"id": "%s-%s-%d" % (family, gid, j + 1), "family": family, "evidence": ev,
                     "question": q["question"], "options": q["options"], "answer": q["answer"]})
    return rows


def generate(split, families, n_groups, seed, start=0, augmented=True):
    """n_groups evidence groups, families in turn; group i uses its own seeded generator (seed, split, i).
    augmented: paraphrase augmentation (train split only; the test split is never augmented)."""
    augmented = augmented and split == "train"
    if augmented and paraphrase is None:
        sys.exit("gen_decisions.py: paraphrase.py must sit next to this file for the train split "
                 "(or pass --no-paraphrase)")
    for i in range(start, start + n_groups):
        fam = families[i % len(families)]
        ctx = Ctx(random.Random("%s/%s/%d" % (seed, split, i)), split)
        yield from make_group(ctx, fam, "%s%d" % (split[:2], i), augmented=augmented)


def _worker(args):
    split, families, n, seed, start, path, augmented = args
    with open(path, "w", encoding="utf-8") as f:
        for row in generate(split, families, n, seed, start, augmented):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=["train", "test"], required=True)
    ap.add_argument("--groups", type=int, required=True, help="evidence groups")
    ap.add_argument("--seed", default="15")
    ap.add_argument("--families", default="base", help="base, adapter, or a comma list")
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--no-paraphrase", action="store_true", help="train split: no paraphrase augmentation")
    a = ap.parse_args()
    fams = BASE_FAMILIES if a.families == "base" else [ADAPTER_FAMILY] if a.families == "adapter" else a.families.split(",")
    if a.workers <= 1:
        _worker((a.split, fams, a.groups, a.seed, 0, a.out, not a.no_paraphrase))
        return
    import multiprocessing as mp
    per = (a.groups + a.workers - 1) // a.workers
    jobs = [(a.split, fams, min(per, a.groups - w * per), a.seed, w * per, "%s.part%d" % (a.out, w),
             not a.no_paraphrase) for w in range(a.workers) if a.groups - w * per > 0]
    with mp.Pool(len(jobs)) as pool:
        parts = pool.map(_worker, jobs)
    with open(a.out, "w", encoding="utf-8") as f:
        for p in parts:
            with open(p, encoding="utf-8") as g:
                f.write(g.read())
            os.remove(p)


if __name__ == "__main__":
    sys.exit(main())
