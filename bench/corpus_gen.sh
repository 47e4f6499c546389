#!/usr/bin/env bash
# A synthetic corpus for `typedecide run` (bench/run.sh, bench/cuda_device.sh): DOCS support tickets (60-90 words) and the 12
# criteria (2 to 5 options) every document is decided on; the same bytes for a given DOCS on every machine (awk's
# srand(18)). Made where it runs (bench/cuda_device.sh makes 10,000 on the GPU host): no big file in the repository.
# Usage: bash bench/corpus_gen.sh DOCS DIR   -> DIR/docs-DOCS.jsonl, DIR/criteria.jsonl
set -euo pipefail
DOCS=${1:?usage: bench/corpus_gen.sh DOCS DIR}
DIR=${2:?usage: bench/corpus_gen.sh DOCS DIR}
mkdir -p "$DIR"
cat >"$DIR/criteria.jsonl" <<'EOF'
{"id": "refund", "question": "Does the customer ask for a refund?", "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]}
{"id": "topic", "question": "What is the main topic?", "options": [{"id": "billing", "description": "Billing or payments"}, {"id": "bug", "description": "A software defect"}, {"id": "account", "description": "Account access"}, {"id": "feature", "description": "A feature request"}]}
{"id": "urgency", "question": "How urgent is it?", "options": [{"id": "1", "description": "Low"}, {"id": "2", "description": "Medium"}, {"id": "3", "description": "High"}]}
{"id": "tone", "question": "What is the customer's tone?", "options": [{"id": "pos", "description": "Positive"}, {"id": "neu", "description": "Neutral"}, {"id": "neg", "description": "Negative"}, {"id": "mixed", "description": "Mixed"}, {"id": "angry", "description": "Angry"}]}
{"id": "platform", "question": "Which platform is mentioned?", "options": [{"id": "ios", "description": "iOS"}, {"id": "android", "description": "Android"}, {"id": "web", "description": "The web app"}]}
{"id": "loyal", "question": "Is the customer long-standing?", "options": [{"id": "y", "description": "Yes, several years"}, {"id": "n", "description": "No, new"}, {"id": "u", "description": "Unknown"}]}
{"id": "amount", "question": "Is an amount of money mentioned?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "churn", "question": "Does the customer threaten to leave?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "second", "question": "Is there a second problem?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "plan", "question": "Which plan?", "options": [{"id": "free", "description": "Free"}, {"id": "pro", "description": "Pro"}, {"id": "team", "description": "Team"}, {"id": "ent", "description": "Enterprise"}]}
{"id": "escalate", "question": "Should a human agent take over?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "lang", "question": "Which language is the ticket in?", "options": [{"id": "en", "description": "English"}, {"id": "other", "description": "Another language"}]}
EOF
awk -v n="$DOCS" 'BEGIN {
    srand(18)
    split("billed twice|charged for a plan I cancelled|the app crashes on start|I cannot log in|logged out every few minutes|export to CSV is missing|the invoice shows the wrong VAT|password reset mail never arrives|sync fails on Android|the web app is slow", prob, "|")
    split("Pro|Team|Free|Enterprise", plan, "|")
    split("iOS 17|Android 14|Chrome on Windows|Safari on a Mac", plat, "|")
    for (i = 0; i < n; i++) {
        w = sprintf("Ticket %d from customer %d. I am on the %s plan and use %s. Since the last update %s, and also %s.", i, int(rand() * 90000) + 10000, plan[int(rand() * 4) + 1], plat[int(rand() * 4) + 1], prob[int(rand() * 10) + 1], prob[int(rand() * 10) + 1])
        w = w sprintf(" I have been a customer for %d years and paid %d.%02d dollars last month. Please fix this soon or refund me; otherwise I will consider other options. Thanks, %s.", int(rand() * 9) + 1, int(rand() * 200), int(rand() * 100), (rand() < 0.5 ? "Dana" : "Sam"))
        printf "{\"id\": \"ticket-%06d\", \"evidence\": \"%s\"}\n", i, w
    }
}' >"$DIR/docs-$DOCS.jsonl"
echo "$DIR/docs-$DOCS.jsonl"
