"""synthetic:dialogs, task-oriented customer-service dialogs from several domains (MultiDoGo
style), the pooled corpus of S3's domain privacy. Records are {id, domain, task, text}; text is
lines "USER: ..." and "AGENT: ...".

Every domain has its own tasks and vocabulary, so a keyword list (DOMAIN_KEYWORDS) and a
classifier can both tell domains apart. The private domains AIRLINE, MEDIA and INSURANCE carry
the secrets a domain-private model must not leak into other domains: AIRLINE confirmation codes,
MEDIA account emails, INSURANCE policy numbers. Every domain plants its customers' names, and a
phone number (AIRLINE, INSURANCE, FASTFOOD) or a card's last four digits (MEDIA, FINANCE) where a
real dialog would ask for one; SOFTWARE plants the email a licence is registered to. Every
occurrence of a planted value is a secret row.

A share of INSURANCE dialogs are travel-insurance claims about flights: the AIRLINE/INSURANCE
overlap the paper names as the reason its reference model leaves one domain out.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence

from faker import Faker

from privleak.data.templating import (
    Piece,
    check_int,
    deck,
    join,
    person,
    secret_rows,
    seeded,
    sentence,
    with_duplicates,
)
from privleak.errors import require

PRIVATE_DOMAINS = ("AIRLINE", "MEDIA", "INSURANCE")
PUBLIC_DOMAINS = ("FASTFOOD", "FINANCE", "SOFTWARE")
DOMAINS = PRIVATE_DOMAINS + PUBLIC_DOMAINS
TRAVEL_TASK = "travel_claim"
MIN_TURNS = 3  # the opening, the customer identifying themselves, the goodbye

# Hand-crafted keyword lists: each is the distinctive vocabulary of its domain's templates and
# occurs in no other domain's templates, except the AIRLINE words of INSURANCE's travel claims.
# Matching is by whole lower-cased words, so a list names each word form the templates use.
# fmt: off
DOMAIN_KEYWORDS: dict[str, tuple[str, ...]] = {
    "AIRLINE": (
        "flight", "flights", "boarding pass", "boarding", "layover", "baggage", "checked bag",
        "seat", "aisle seat", "window seat", "gate", "confirmation code", "itinerary",
        "frequent flyer", "airport", "nonstop", "connecting flight", "overhead bin", "airline",
        "departure",
    ),
    "MEDIA": (
        "subscription", "streaming", "stream", "episode", "episodes", "season", "channel",
        "channels", "billing cycle", "account email", "watchlist", "ad-free", "family plan",
        "live sports", "parental controls", "buffering", "smart tv", "series", "subtitles",
    ),
    "INSURANCE": (
        "policy", "policy number", "claim", "claims", "deductible", "premium", "adjuster",
        "coverage", "insured", "insurance", "collision", "windshield", "water damage",
        "homeowners", "liability", "renewal", "declarations page", "payout",
    ),
    "FASTFOOD": (
        "burger", "cheeseburger", "fries", "combo meal", "drive-thru", "nuggets", "milkshake",
        "delivery driver", "restaurant", "pickup window", "sauce", "menu", "meal", "fryer",
        "lettuce wrap",
    ),
    "FINANCE": (
        "debit card", "credit card", "checking account", "savings account", "transaction",
        "transactions", "overdraft", "wire transfer", "routing number", "statement", "branch",
        "interest rate", "balance", "fraud", "dispute", "online banking", "deposit",
    ),
    "SOFTWARE": (
        "software", "license", "license key", "activation", "activate", "installer", "install",
        "reinstall", "crash", "crashes", "version", "error code", "plugin", "plugins", "laptop",
        "operating system", "admin console", "workspace", "sync", "patch", "desktop app",
    ),
}
# fmt: on

# Slots whose values are planted secrets, and the kind their ground-truth row gets.
_PLANTED = {
    "customer": "name",
    "code": "confirmation_code",
    "email": "email",
    "policy": "policy_number",
    "card": "card_tail",
    "phone": "phone",
}
_PLANTED_SLOT = re.compile(r"\{(" + "|".join(_PLANTED) + r")\}")
# Confirmation codes skip 0/O and 1/I, as airlines do, so a code reads back unambiguously.
_CODE_LETTERS = string.ascii_uppercase.replace("O", "").replace("I", "")
_CODE_CHARS = _CODE_LETTERS + "23456789"

# Shared by every domain: domain-neutral, so the opening and goodbye never name a domain.
_HELLO = "Hi.|Hello.|Hi there.|Good morning.|Good afternoon.|Hello there!|Hey!".split("|")
_WELCOME = [
    "Thank you for contacting {brand}, I can help with that.",
    "Welcome to {brand} support, I am happy to help.",
    "Thanks for reaching out to {brand}. Let me look into this for you.",
    "You have reached {brand}. Let me see what I can do.",
]
_BYE = [
    "USER: That is all, thank you.\nAGENT: You are welcome, {customer}. Have a great day!",
    "USER: Great, thanks for your help.\nAGENT: Glad I could help. Take care, {customer}.",
    "USER: No, that covers everything. Thanks!\nAGENT: Thank you for your patience. Goodbye!",
    "USER: Perfect, I appreciate it.\nAGENT: My pleasure, {customer}. Enjoy the rest of your day.",
    "USER: Okay, thanks a lot.\nAGENT: Anytime. Thank you for calling, and have a good evening.",
]

_CITIES = (
    "Denver|Chicago|Boston|Seattle|Atlanta|Dallas|Phoenix|Miami|Portland|Houston|Orlando|Detroit|"
    "Nashville|Salt Lake City|San Diego|Minneapolis"
).split("|")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November".split("|")
_DATES = [f"{month} {day}" for month in _MONTHS for day in range(1, 29)]
_TIMES = [
    f"{h}:{m:02d} {half}" for h in range(1, 13) for m in (0, 15, 30, 45) for half in ("am", "pm")
]
_FEW = "two|three|four|five".split("|")
_PRICES = [f"${d}.{c}" for d in range(6, 25) for c in ("49", "99")]

# Per domain: brands, pools (one value each per dialog, so a dialog stays consistent), how the
# agent asks the customer to identify themselves, how they answer, how the agent confirms, and
# tasks: opening requests plus "USER line || AGENT line" exchanges drawn in shuffled rounds.
_DOMAINS: dict[str, dict] = {
    "AIRLINE": {
        "brands": ["Northwind Airlines", "Skyline Air", "Blue Harbor Airways", "Summit Air"],
        "pools": {
            "date": _DATES,
            "date2": _DATES,
            "time": _TIMES,
            "time2": _TIMES,
            "seat": [f"{row}{letter}" for row in range(3, 39) for letter in "ABCDEF"],
            "seat2": [f"{row}{letter}" for row in range(3, 39) for letter in "ABCDEF"],
            "flight": [f"{prefix} {k}" for prefix in ("NW", "SK") for k in range(101, 990, 7)],
            "gate": [f"{c}{k}" for c in "ABCDE" for k in range(1, 40)],
            "fee": "$35|$50|$75|$99|$125|$150|$200".split("|"),
            "hours": _FEW,
            "minutes": "30|35|40|45".split("|"),
            "miles": [f"{k},{h}00" for k in range(2, 40) for h in (0, 5)],
            "bags": "one checked bag|two checked bags".split("|"),
        },
        "ask": [
            "Could I have your name and the six-character confirmation code?",
            "May I have your full name and the confirmation code on your booking?",
            "What is the name on the booking, and the confirmation code?",
        ],
        "identify": [
            "Sure, it is {customer}, and the confirmation code is {code}.",
            "My name is {customer}. The code is {code}.",
            "{customer}, confirmation code {code}.",
        ],
        "found": [
            "Thank you, {customer}. I have booking {code} in front of me.",
            "Thanks. I found your itinerary under confirmation code {code}.",
            "Got it, {customer}. Booking {code} shows your flight from {city} to {city2}.",
        ],
        "tasks": {
            "change_flight": {
                "open": [
                    "I need to change my flight from {city} to {city2} on {date}.",
                    "Can I move my {time} flight to {city2} to a later day?",
                    "Something came up and I have to rebook my flight to {city2}.",
                ],
                "exchanges": [
                    "Is there a later flight on {date}? || I see a nonstop flight leaving {city} "
                    "at {time2} on {date}, and it still has open seats.",
                    "What is the change fee for this booking? || The change fee on your fare is "
                    "{fee}, plus any difference in the fare.",
                    "Can I keep seat {seat} on the new flight? || Seat {seat} is taken on that "
                    "flight, but I can give you window seat {seat2}.",
                    "Would I have a layover? || Yes, there is a {hours}-hour layover in {city3} "
                    "before the connecting flight to {city2}.",
                    "Please text the new itinerary to {phone}. || Done. The updated itinerary and "
                    "a new boarding pass are on their way to {phone}.",
                    "Will my frequent flyer miles still post? || Yes, the {miles} frequent flyer "
                    "miles post to your profile within three days of the flight.",
                    "Which gate does the new flight leave from? || Flight {flight} leaves from "
                    "gate {gate}, and boarding starts {minutes} minutes before departure.",
                    "Okay, please go ahead with the change. || All set. You are on flight {flight} "
                    "from {city} to {city2} on {date}, departure at {time2}.",
                ],
            },
            "seat_selection": {
                "open": [
                    "I would like to choose a seat for my flight to {city2} on {date}.",
                    "Can I switch to a window seat on my flight to {city2}?",
                    "My boarding pass shows a middle seat and I would like something better.",
                ],
                "exchanges": [
                    "Is there an aisle seat near the front? || Aisle seat {seat} is open near the "
                    "front of the cabin.",
                    "How much is an extra legroom seat? || Extra legroom seats on this flight cost "
                    "{fee} each way.",
                    "Can my partner sit next to me? || I can put you both in seats {seat} and "
                    "{seat2}, side by side.",
                    "Will the new seat show on my boarding pass? || Yes, your boarding pass will "
                    "show seat {seat} when you check in online or at the airport.",
                    "Is the exit row available? || The exit row is open, but you must be willing "
                    "to help the crew in an emergency to sit there.",
                    "What about the connecting flight from {city3}? || On the connecting flight "
                    "from {city3} I reserved window seat {seat2} for you.",
                    "Please text the seat details to {phone}. || Done. The seat confirmation is "
                    "on its way to {phone}.",
                ],
            },
            "baggage": {
                "open": [
                    "My checked bag did not come out at the carousel after my flight into {city2}.",
                    "I have a question about the baggage allowance for my flight on {date}.",
                    "My suitcase was damaged on the flight from {city}.",
                ],
                "exchanges": [
                    "Where is my bag now? || Our baggage tracer shows the bag stayed in {city3} "
                    "during your layover; it arrives on the next flight.",
                    "How many bags can I bring? || Your fare includes {bags} up to fifty pounds, "
                    "plus one small bag for the overhead bin.",
                    "Can the bag be delivered to my hotel? || Yes, a courier will bring the bag to "
                    "your address in {city2} within a day.",
                    "What is the fee for an overweight bag? || An overweight bag between fifty and "
                    "seventy pounds costs {fee} at the airport counter.",
                    "Do I get anything for the delay? || The airline pays up to {fee} for "
                    "essentials while the bag is delayed, so keep your receipts.",
                    "Please text me updates at {phone}. || I added {phone} to the baggage file, "
                    "so you get a text when the bag is found.",
                    "The agent at the gate tagged it for me. || Yes, it was tagged at gate "
                    "{gate}, so the baggage team can follow it.",
                ],
            },
            "cancel_flight": {
                "open": [
                    "I need to cancel my flight to {city2} on {date}.",
                    "Can I get a travel credit if I cancel my flight today?",
                    "I will not make my {time} flight to {city2} and want to cancel it.",
                ],
                "exchanges": [
                    "Will I get my money back? || Your fare is refundable, so the money goes back "
                    "to your original form of payment within a week.",
                    "Can I use the credit on other flights? || Yes, the travel credit is good for "
                    "one year on all our flights.",
                    "What about my seat fee? || The fee for seat {seat} is returned with the fare.",
                    "Do I lose my frequent flyer miles? || No, the {miles} miles go back to your "
                    "frequent flyer profile.",
                    "Does this cancel my return from {city2} too? || Only the outbound flight is "
                    "cancelled; your return flight on {date2} stays booked.",
                    "Please text the cancellation notice to {phone}. || The cancellation notice "
                    "is on its way to {phone}.",
                ],
            },
        },
    },
    "MEDIA": {
        "brands": ["StreamNest", "Flicker TV", "Marquee Plus", "Channelwave"],
        "pools": {
            "show": (
                "The Harbor Files|Midnight Kitchen|Northern Lights|Cold Case Diaries|Starship "
                "Delta|Garden Rescue|The Quiet Valley|Street Chefs|Lost Frequencies|Maple Court"
            ).split("|"),
            "plan": "basic plan|ad-free plan|family plan|premier plan".split("|"),
            "price": _PRICES,
            "price2": "$4.99|$5.99|$7.99|$9.99".split("|"),
            "device": "smart TV|streaming stick|game console|tablet|phone".split("|"),
            "date": _DATES,
            "screens": _FEW,
            "season": [str(k) for k in range(2, 9)],
            "episode": [str(k) for k in range(1, 13)],
        },
        "ask": [
            "May I have your name and the account email on file?",
            "Could you give me your full name and your account email?",
            "What name and account email is the subscription under?",
        ],
        "identify": [
            "It is {customer}, and the account email is {email}.",
            "My name is {customer}, account email {email}.",
            "{customer}. The email on the account is {email}.",
        ],
        "found": [
            "Thanks, {customer}. I found the subscription under {email}.",
            "Thank you. I have the account for {email} open now.",
            "Got it, {customer}, I see your {plan} under that account email.",
        ],
        "tasks": {
            "cancel_subscription": {
                "open": [
                    "I want to cancel my streaming subscription.",
                    "Please help me end my {plan} before the next billing cycle.",
                    "How do I stop my subscription from renewing every month?",
                ],
                "exchanges": [
                    "When does my access end? || You can keep streaming until the end of the "
                    "current billing cycle on {date}.",
                    "Will I lose my watchlist? || Your watchlist and viewing history stay saved "
                    "for ten months in case you come back.",
                    "Is there a cheaper plan instead? || We can move you to the basic plan at "
                    "{price} a month, with short ads between episodes.",
                    "Can I pause the subscription instead? || Yes, you can pause it for up to "
                    "three months and resume streaming any time.",
                    "Please send the confirmation to my account email. || The cancellation "
                    "confirmation has gone to {email}.",
                    "Do I get money back for this month? || We do not prorate, but you will not "
                    "be charged again after {date}.",
                    "Will the kids profile be deleted? || The kids profile stays, but its "
                    "parental controls are switched off.",
                ],
            },
            "billing": {
                "open": [
                    "I was charged twice for my subscription this month.",
                    "My bill went up to {price} and I do not know why.",
                    "There is a charge from your streaming service that I did not expect.",
                ],
                "exchanges": [
                    "Which card was charged? || Both charges went to the card ending in {card} on "
                    "{date}.",
                    "Why did the price change? || The {plan} moved to {price} a month at the start "
                    "of this billing cycle.",
                    "Can you give back the extra charge? || Yes, I returned {price} to the card "
                    "ending in {card}; it takes three to five days.",
                    "Can I use another card? || You can change the card on the billing page, and "
                    "the new card is charged from the next billing cycle.",
                    "Please email me the receipt. || The receipt is on its way to {email}.",
                    "Am I paying for the sports channels? || Yes, the live sports channels add "
                    "{price2} a month; I can remove those channels for you.",
                ],
            },
            "streaming_issue": {
                "open": [
                    "The episodes keep buffering on my {device}.",
                    "I cannot stream anything on my {device} since yesterday.",
                    "The new season of {show} will not play.",
                ],
                "exchanges": [
                    "It freezes in the middle of an episode. || Please set the streaming quality "
                    "to high instead of ultra and restart the app.",
                    "The app says too many screens are streaming. || Your plan allows {screens} "
                    "screens at once, and someone is streaming on another device.",
                    "Is {show} still on your service? || Yes, every season of {show} is streaming; "
                    "episode {episode} of season {season} was added on {date}.",
                    "The subtitles do not match the voices. || That is a known issue with episode "
                    "{episode}; our team is fixing it this week.",
                    "Can I save episodes for offline viewing? || Offline viewing comes with the "
                    "ad-free plan, for up to twenty episodes.",
                    "The channel guide is empty. || Sign out and back in on the {device}, and the "
                    "channel guide will reload.",
                ],
            },
            "plan_change": {
                "open": [
                    "I would like to add the live sports channels to my plan.",
                    "Can I move up to the family plan?",
                    "I want to switch to the ad-free plan.",
                ],
                "exchanges": [
                    "How much does the {plan} cost? || The {plan} is {price} a month, on the same "
                    "billing cycle.",
                    "How many profiles can we have? || The family plan gives you up to {screens} "
                    "profiles and {screens} screens streaming at once.",
                    "Does it include {show}? || Yes, {show} and every other series in the catalog "
                    "are included.",
                    "When does the change start? || The new plan starts right away, and the "
                    "difference shows on your next bill on {date}.",
                    "Will I still see ads? || No, the ad-free plan removes ads from every movie "
                    "and episode.",
                    "Send the plan details to my account email. || I sent the plan details to "
                    "{email}.",
                ],
            },
        },
    },
    "INSURANCE": {
        "brands": [
            "Harborline Insurance",
            "Keystone Mutual",
            "Evergreen Assurance",
            "Sentinel Insurance",
        ],
        "pools": {
            "car": (
                "2018 Honda Civic|2020 Toyota RAV4|2016 Ford Focus|2019 Subaru Outback|2021 Mazda "
                "CX-5|2017 Chevy Malibu|2022 Kia Sportage|2015 Nissan Altima"
            ).split("|"),
            "deductible": "$250|$500|$750|$1,000".split("|"),
            "deductible2": "$1,500|$2,000|$2,500".split("|"),
            "premium": [f"${k}" for k in range(68, 240, 7)],
            "saving": "$9|$12|$15|$18|$22|$27".split("|"),
            "amount": [f"${k},{h}00" for k in range(1, 20) for h in (0, 2, 5, 7)],
            "days": _FEW,
            "date": _DATES,
        },
        "ask": [
            "Can you give me your full name and your policy number?",
            "May I have the name of the insured and the policy number?",
            "What is your name and the policy number, please?",
        ],
        "identify": [
            "It is {customer}, policy number {policy}.",
            "My name is {customer} and my policy number is {policy}.",
            "{customer}. The policy is {policy}.",
        ],
        "found": [
            "Thank you, {customer}. I have pulled up policy {policy}.",
            "Thanks. I see policy {policy} is active.",
            "Got it, {customer}, policy {policy} is on my screen.",
        ],
        "tasks": {
            "auto_claim": {
                "open": [
                    "I was in a car accident and need to file a claim.",
                    "Someone hit my parked {car} and I want to start a claim.",
                    "A rock cracked the windshield of my {car}.",
                ],
                "exchanges": [
                    "What do you need from me? || Please describe the damage and upload photos; "
                    "the claim then goes to an adjuster.",
                    "Does my policy cover this? || Yes, your policy has collision coverage with a "
                    "{deductible} deductible.",
                    "When will an adjuster contact me? || An adjuster will call you at {phone} "
                    "within {days} business days.",
                    "Do I need a police report? || For a collision claim we ask for the police "
                    "report number if one was filed.",
                    "Will my premium go up? || A single not-at-fault claim does not usually raise "
                    "your premium at renewal.",
                    "Is a rental car included? || Your coverage includes a rental car for up to "
                    "{days} weeks while the claim is open.",
                    "Can I get the claim details in writing? || The claim is open under policy "
                    "{policy}, and a summary is on its way to {phone}.",
                ],
            },
            "home_claim": {
                "open": [
                    "A pipe burst and we have water damage in the kitchen.",
                    "A storm damaged our roof and I need to file a homeowners claim.",
                    "We had a small fire in the garage and I want to start a claim.",
                ],
                "exchanges": [
                    "Is water damage covered? || Sudden water damage is covered under your "
                    "homeowners policy, minus the {deductible} deductible.",
                    "Should I hire a plumber now? || Yes, stop the leak and keep the receipts; "
                    "reasonable repairs are part of the claim.",
                    "How much will you pay? || The adjuster inspects the damage and estimates the "
                    "payout; similar claims settle around {amount}.",
                    "Can someone come out this week? || An adjuster can inspect the home on "
                    "{date} and will call {phone} to confirm.",
                    "What about our damaged furniture? || Personal property is covered up to the "
                    "limit of your policy, after the deductible.",
                    "Do you need photos? || Please upload photos of the damage and a list of the "
                    "damaged items to the claim.",
                ],
            },
            "premium_question": {
                "open": [
                    "My premium went up at renewal and I want to know why.",
                    "I would like to lower my monthly premium.",
                    "I have a question about the coverage and premium on my {car}.",
                ],
                "exchanges": [
                    "Why did my premium change? || Your premium rose to {premium} a month because "
                    "rates in your area went up at renewal.",
                    "Would a higher deductible help? || Raising the deductible from {deductible} "
                    "to {deductible2} lowers your premium by about {saving} a month.",
                    "Is there a discount for bundling? || Yes, bundling your auto and homeowners "
                    "policies saves about ten percent on the premium.",
                    "What does my coverage include now? || Your policy includes liability, "
                    "collision and comprehensive coverage.",
                    "Can I add my daughter as a driver? || Yes, adding a newly insured driver "
                    "raises the premium by about {saving} a month.",
                    "Please mail me the updated declarations page. || The declarations page for "
                    "policy {policy} is in the mail.",
                ],
            },
            TRAVEL_TASK: {
                "open": [
                    "I have travel insurance with you and my flight to {city} was cancelled.",
                    "My baggage was lost on a flight and I bought travel insurance from you.",
                    "I missed my connecting flight during a layover in {city2} and want to use "
                    "my travel insurance.",
                ],
                "exchanges": [
                    "Does my travel insurance cover a cancelled flight? || Yes, your travel policy "
                    "covers prepaid costs when the airline cancels the flight, up to {amount}.",
                    "What do I need to send? || Please upload your boarding pass, the notice from "
                    "the airline and your receipts to the claim.",
                    "My baggage has been missing for three days. || Baggage delay coverage pays up "
                    "to {amount} for essentials after twenty-four hours.",
                    "I paid for a hotel during the layover. || A hotel during a long layover is "
                    "covered as trip delay, minus the {deductible} deductible.",
                    "Does a refund from the airline change my claim? || We subtract any refund "
                    "from the airline from the claim amount.",
                    "When will I hear back? || A travel claims adjuster will call you at {phone} "
                    "within {days} business days.",
                ],
            },
        },
    },
    "FASTFOOD": {
        "brands": ["Burger Barn", "Crispy Cluck", "Big Bun Grill", "Taco Trail"],
        "pools": {
            "item": (
                "double cheeseburger|chicken sandwich|veggie burger|bacon burger|spicy chicken "
                "wrap|fish sandwich|classic burger"
            ).split("|"),
            "side": "large fries|curly fries|onion rings|side salad|chicken nuggets".split("|"),
            "drink": "chocolate milkshake|vanilla milkshake|lemonade|iced tea|root beer".split("|"),
            "sauce": "ranch|barbecue sauce|honey mustard|garlic sauce|hot sauce".split("|"),
            "street": (
                "Main Street|Oak Avenue|Elm Road|Pine Street|Lake Drive|Mill Road|Cedar Lane"
            ).split("|"),
            "price": _PRICES,
            "minutes": "twenty|thirty|forty|fifty".split("|"),
            "calories": [str(k) for k in range(390, 990, 30)],
        },
        "ask": [
            "Can I get your name and the phone number on the order?",
            "Could you tell me your name and the phone number you ordered with?",
            "What name and phone number was the order placed under?",
        ],
        "identify": [
            "It is {customer}, and my phone number is {phone}.",
            "{customer}, phone {phone}.",
            "My name is {customer}. I ordered with {phone}.",
        ],
        "found": [
            "Thanks, {customer}. I found your order from the {street} restaurant.",
            "Thank you. I see the order under {phone}.",
            "Got it, {customer}, your meal from the {street} restaurant is on my screen.",
        ],
        "tasks": {
            "wrong_order": {
                "open": [
                    "My delivery was missing the {side}.",
                    "I got the wrong burger at the drive-thru on {street}.",
                    "The {item} in my combo meal was not what I ordered.",
                ],
                "exchanges": [
                    "I ordered a {item} but got something else. || I am sorry about that; I will "
                    "refund the {item} and add a coupon for a free combo meal.",
                    "The {side} were missing too. || I have refunded {price} for the missing "
                    "{side}.",
                    "My {drink} spilled in the bag. || Please keep the receipt; the manager at the "
                    "{street} restaurant will replace the {drink}.",
                    "Can you remake it? || Yes, the {street} restaurant can remake your meal if "
                    "you stop by the pickup window within two hours.",
                    "There was no {sauce} in the bag. || I apologize; I added free {sauce} and "
                    "fries to your next order in the app.",
                    "Will I get my reward points back? || Yes, the reward points for this meal are "
                    "back in the app.",
                ],
            },
            "late_delivery": {
                "open": [
                    "My food delivery is over an hour late.",
                    "The delivery driver never showed up with my order.",
                    "My burger and fries arrived cold.",
                ],
                "exchanges": [
                    "Where is the driver? || The delivery driver left the restaurant {minutes} "
                    "minutes ago and should arrive soon.",
                    "Can the driver call me? || I asked the delivery driver to call you at {phone} "
                    "from outside.",
                    "The fries are cold and soggy. || I am sorry; I refunded the delivery fee and "
                    "the {side}.",
                    "Can I get my money back for the whole meal? || Yes, I refunded {price} for "
                    "the whole meal.",
                    "This happens every time. || I reported the delivery to the manager of the "
                    "{street} restaurant.",
                    "Can I pick it up instead? || Sure, your meal will be ready at the pickup "
                    "window in about ten minutes.",
                ],
            },
            "menu_question": {
                "open": [
                    "Does the {item} contain peanuts?",
                    "I have a question about the menu at the {street} restaurant.",
                    "What comes with the {item} combo meal?",
                ],
                "exchanges": [
                    "Is the {item} gluten free? || The {item} comes on a bun with gluten, but you "
                    "can order it as a lettuce wrap.",
                    "Are the fries cooked in peanut oil? || No, our fries are cooked in vegetable "
                    "oil in a separate fryer.",
                    "What comes in the combo meal? || The combo meal comes with a {item}, {side} "
                    "and a {drink}.",
                    "How late is the drive-thru open? || The drive-thru on {street} is open until "
                    "midnight every day.",
                    "Do you still have the {drink}? || Yes, the {drink} is back on the menu for "
                    "the summer.",
                    "How many calories are in the {item}? || The {item} has about {calories} "
                    "calories without sauce.",
                ],
            },
        },
    },
    "FINANCE": {
        "brands": ["Summit Bank", "Riverstone Credit Union", "Harbor Federal Bank", "Maple Trust"],
        "pools": {
            "merchant": (
                "an online electronics store|a gas station|a hotel booking site|a jewelry store|"
                "a sporting goods store|a food delivery service"
            ).split("|"),
            "amount": [f"${d}.{c:02d}" for d in range(14, 900, 37) for c in (5, 20, 75)],
            "fee": "$15|$20|$25|$30|$35".split("|"),
            "fee2": "$40|$45|$50".split("|"),
            "limit": "$5,000|$10,000|$25,000".split("|"),
            "balance": [f"${k},{h}00" for k in range(1, 9) for h in (1, 4, 6, 8)],
            "rate": "1.5|2.1|3.4|4.2|4.5".split("|"),
            "date": _DATES,
            "days": _FEW,
        },
        "ask": [
            "Please tell me your name and the last four digits of your card.",
            "Can I have your full name and the last four digits of the card?",
            "What is your name, and which card is this about?",
        ],
        "identify": [
            "I am {customer}, and the card ends in {card}.",
            "{customer}. The last four digits are {card}.",
            "My name is {customer}, card ending {card}.",
        ],
        "found": [
            "Thank you, {customer}. I see the card ending in {card}.",
            "Thanks. The card ending in {card} is linked to your checking account.",
            "Got it, {customer}, I have your accounts open.",
        ],
        "tasks": {
            "card_dispute": {
                "open": [
                    "There is a transaction on my debit card that I did not make.",
                    "I want to dispute a charge on my credit card statement.",
                    "Someone used my card at {merchant}.",
                ],
                "exchanges": [
                    "I never made this purchase. || I see a transaction of {amount} at {merchant} "
                    "on {date} on the card ending in {card}.",
                    "Can you block the card? || The card ending in {card} is blocked, and a new "
                    "debit card will arrive in {days} business days.",
                    "Will I get my money back? || I opened a fraud dispute and credited {amount} "
                    "to your checking account while we investigate.",
                    "How long will the dispute take? || Most disputes are settled within {days} "
                    "weeks, and you will see updates on your statement.",
                    "Were there other charges? || I see no other suspicious transactions on your "
                    "checking account.",
                    "Should I change my password? || Yes, please change your online banking "
                    "password and turn on text alerts for every transaction.",
                ],
            },
            "lost_card": {
                "open": [
                    "I lost my credit card yesterday.",
                    "My debit card was stolen at the mall.",
                    "I cannot find my credit card and I am worried about fraud.",
                ],
                "exchanges": [
                    "Can you freeze the card? || The card ending in {card} is frozen, so no new "
                    "transactions can go through.",
                    "When will the new card come? || A replacement credit card will arrive in "
                    "{days} business days, or same day at a branch.",
                    "Were there any charges after I lost it? || The last transaction was {amount} "
                    "at {merchant} on {date}; was that yours?",
                    "Will my automatic payments fail? || Your new card keeps the same account, but "
                    "please update automatic payments with the new number.",
                    "Can I still use the ATM? || Yes, your checking account still works at the "
                    "ATM with your online banking app.",
                    "Is there a fee for the new card? || There is no fee for a replacement debit "
                    "card.",
                ],
            },
            "wire_transfer": {
                "open": [
                    "I need to send a wire transfer to my landlord.",
                    "My wire transfer from last week has not arrived.",
                    "How do I set up a wire transfer from my savings account?",
                ],
                "exchanges": [
                    "What is the fee for a wire transfer? || A domestic wire transfer costs {fee}, "
                    "and an international one costs {fee2}.",
                    "When will the money arrive? || A wire transfer sent before two in the "
                    "afternoon arrives the same business day.",
                    "What details do you need? || I need the routing number and the account "
                    "number of the receiving bank.",
                    "Can I send it from my savings account? || Yes, though savings account "
                    "withdrawals are limited to six a month.",
                    "Is there a limit? || Your daily wire transfer limit is {limit}; a branch can "
                    "raise it if you bring identification.",
                    "Where is the transfer now? || The wire transfer left on {date} and is waiting "
                    "on the receiving bank.",
                ],
            },
            "overdraft": {
                "open": [
                    "I was charged an overdraft fee on my checking account.",
                    "Why is my balance negative this morning?",
                    "I want to understand the fees on my last statement.",
                ],
                "exchanges": [
                    "Why did I get an overdraft fee? || A payment of {amount} cleared on {date} "
                    "when your checking account balance was too low.",
                    "Can you waive the fee? || As a one-time courtesy, I waived the {fee} "
                    "overdraft fee.",
                    "How do I avoid this? || You can link your savings account for overdraft "
                    "protection.",
                    "What is my balance now? || Your available balance is {balance} after "
                    "today's deposit.",
                    "What interest rate does savings pay? || Our savings account pays an interest "
                    "rate of {rate} percent a year.",
                    "When does the deposit clear? || A mobile deposit clears by the next business "
                    "day.",
                ],
            },
        },
    },
    "SOFTWARE": {
        "brands": ["Pixelforge", "CloudDesk", "Nimbus Office", "Codewright"],
        "pools": {
            "product": "photo editor|project planner|desktop app|diagram tool|note taker".split(
                "|"
            ),
            "os": "Windows 11|Windows 10|macOS Sonoma|macOS Ventura|Ubuntu 22.04".split("|"),
            "version": [f"{a}.{b}.{c}" for a in (3, 4, 5) for b in range(0, 6) for c in (0, 1, 3)],
            "version2": [f"{a}.{b}.{c}" for a in (5, 6) for b in range(0, 6) for c in (2, 4)],
            "error": [f"E-{k}" for k in range(101, 999, 23)],
            "price": "$29|$49|$79|$99|$129".split("|"),
            "devices": _FEW,
            "storage": "50 GB|100 GB|200 GB|1 TB".split("|"),
            "date": _DATES,
        },
        "ask": [
            "What is your name and the email the license is registered to?",
            "Could I have your name and the email you registered the license with?",
            "May I have your name and your registered email?",
        ],
        "identify": [
            "My name is {customer} and I registered with {email}.",
            "It is {customer}, registered email {email}.",
            "{customer}. The license is under {email}.",
        ],
        "found": [
            "Thanks, {customer}. I found the license registered to {email}.",
            "Thank you. I see your license for the {product} under {email}.",
            "Got it, {customer}, your license is on my screen.",
        ],
        "tasks": {
            "license_activation": {
                "open": [
                    "My license key is not working.",
                    "The software says my license has expired.",
                    "I cannot activate the {product} on my new laptop.",
                ],
                "exchanges": [
                    "It says the license key is invalid. || That license key is already active on "
                    "{devices} devices, which is the limit for your license.",
                    "Can you move the license to my new laptop? || I released the old activation, "
                    "so you can activate the software on the new laptop now.",
                    "Where do I find my license key? || Your license key is in the welcome email "
                    "sent to {email}; I also sent it again.",
                    "My license expired early. || Your license runs until {date}; the message came "
                    "from an old installer version.",
                    "Can I add more users? || You can add users in the admin console; each extra "
                    "license costs {price} a year.",
                    "Will I lose my projects? || No, your projects stay in the workspace while the "
                    "license is inactive.",
                ],
            },
            "crash": {
                "open": [
                    "The {product} crashes every time I open it.",
                    "Version {version} keeps crashing on {os}.",
                    "The desktop app closes by itself after a few minutes.",
                ],
                "exchanges": [
                    "It crashes right after the splash screen. || That crash is a known bug in "
                    "version {version}; please install the {version2} patch.",
                    "I see error code {error}. || Error code {error} means a plugin failed to "
                    "load; start in safe mode and turn off plugins.",
                    "Should I reinstall? || Yes, remove the app, restart your computer and run "
                    "the latest installer.",
                    "Can you look at my crash log? || I sent instructions for uploading the crash "
                    "log to {email}.",
                    "Is {os} supported? || Yes, {os} is a supported operating system from version "
                    "{version2} on.",
                    "Did I lose my files? || Autosave keeps a copy of your files in the workspace "
                    "every five minutes.",
                ],
            },
            "install": {
                "open": [
                    "The installer fails halfway through.",
                    "I cannot install the {product} on {os}.",
                    "The installer says my operating system is not supported.",
                ],
                "exchanges": [
                    "The installer stops at sixty percent. || That usually means the disk is full "
                    "or antivirus software is blocking the installer.",
                    "Do I need admin rights? || Yes, the installer needs administrator rights on "
                    "{os}.",
                    "Is there an offline installer? || Yes, I sent a link to the offline installer "
                    "to {email}.",
                    "Which version should I install? || Please install version {version2}; it "
                    "fixes the installer bug on {os}.",
                    "Will it run on my laptop? || Your laptop meets the system requirements for "
                    "version {version2}.",
                    "I see error code {error} during setup. || Error code {error} means a file is "
                    "locked; close the desktop app and run the installer again.",
                ],
            },
            "sync": {
                "open": [
                    "My files are not syncing between my laptop and the cloud workspace.",
                    "The sync has been stuck since the last update.",
                    "Changes I make in the {product} do not sync to my other devices.",
                ],
                "exchanges": [
                    "The sync icon is stuck. || Sign out of the desktop app and sign back in to "
                    "restart sync.",
                    "Some files show a conflict. || Sync conflicts happen when two devices edit a "
                    "file offline; keep the newer copy.",
                    "How much cloud storage do I have? || Your license includes {storage} in the "
                    "workspace, and you have used most of it.",
                    "Is sync working on {os}? || Yes, sync works on {os} from version {version2} "
                    "on.",
                    "Can I sync a shared folder? || Yes, the workspace owner can share a folder "
                    "from the admin console.",
                    "Did I lose changes? || No, the workspace keeps thirty days of file history.",
                ],
            },
        },
    },
}


def _check_options(domains, turns, travel_insurance_share) -> None:
    allowed = ", ".join(DOMAINS)
    require(
        isinstance(domains, list | tuple)
        and bool(domains)
        and all(isinstance(d, str) for d in domains),
        f"synthetic:dialogs domains must be a non-empty list of names from {allowed}; "
        f"got {domains!r}",
    )
    for domain in domains:
        require(
            domain in DOMAINS,
            f"synthetic:dialogs domains: '{domain}' is unknown; allowed: {allowed}",
        )
    require(
        len(set(domains)) == len(domains),
        f"synthetic:dialogs domains must not repeat a name; got {list(domains)}",
    )
    turns_ok = (
        isinstance(turns, list | tuple)
        and len(turns) == 2
        and all(isinstance(t, int) and not isinstance(t, bool) for t in turns)
        and MIN_TURNS <= turns[0] <= turns[1]
    )
    require(
        turns_ok,
        f"synthetic:dialogs turns must be [low, high] with integers {MIN_TURNS} <= low <= high "
        f"(exchanges of a USER and an AGENT line); got {turns!r}",
    )
    share = travel_insurance_share
    require(
        isinstance(share, int | float) and not isinstance(share, bool) and 0 <= share <= 1,
        f"synthetic:dialogs travel_insurance_share must be a number in [0, 1]; got {share!r}",
    )


def _planted(value: str, kind: str) -> Piece:
    return value, [{"start": 0, "end": len(value), "kind": kind, "text": value}]


def _fill(rng: random.Random, template: str, facts: dict[str, str]) -> Piece:
    """Fill template from facts; the _PLANTED slots become secret spans."""
    parts = _PLANTED_SLOT.split(template)  # literal templates at even, planted slots at odd
    pieces = [
        _planted(facts[part], _PLANTED[part]) if i % 2 else sentence(rng, part, facts, {})
        for i, part in enumerate(parts)
    ]
    return join(pieces, "")


def _address(first: str, last: str, fake: Faker) -> str:
    local = re.sub(r"[^a-z]", "", first.lower()) + "." + re.sub(r"[^a-z]", "", last.lower())
    return f"{local}@{fake.free_email_domain()}"


def _facts(fake: Faker, rng: random.Random, style: dict) -> dict[str, str]:
    """One dialog's customer, secrets and pool values (fixed for the whole dialog)."""
    first, last, _ = person(fake, rng)
    facts = {key: rng.choice(pool) for key, pool in style["pools"].items()}
    city, city2, city3 = rng.sample(_CITIES, 3)  # a trip's cities differ
    return facts | {
        "city": city,
        "city2": city2,
        "city3": city3,
        "brand": rng.choice(style["brands"]),
        "customer": f"{first} {last}",
        "email": _address(first, last, fake),
        "phone": fake.phone_number(),
        # A letter first, so a code never reads as a number.
        "code": rng.choice(_CODE_LETTERS) + "".join(rng.choices(_CODE_CHARS, k=5)),
        "policy": "POL-" + "".join(rng.choices(string.digits, k=8)),
        "card": f"{rng.randrange(10_000):04d}",
    }


def _dialog(fake: Faker, rng: random.Random, domain: str, task: str, turns: int) -> Piece:
    style = _DOMAINS[domain]
    facts = _facts(fake, rng, style)

    def line(speaker: str, *templates: str) -> Piece:
        return join([(f"{speaker}:", [])] + [_fill(rng, t, facts) for t in templates], " ")

    lines = [
        line("USER", rng.choice(_HELLO), rng.choice(style["tasks"][task]["open"])),
        line("AGENT", rng.choice(_WELCOME), rng.choice(style["ask"])),
        line("USER", rng.choice(style["identify"])),
        line("AGENT", rng.choice(style["found"])),
    ]
    exchanges = deck(rng, style["tasks"][task]["exchanges"])
    for _ in range(turns - MIN_TURNS):
        user, agent = next(exchanges).split(" || ")
        lines += [line("USER", user), line("AGENT", agent)]
    lines.append(_fill(rng, rng.choice(_BYE), facts))
    return join(lines, "\n")


def dialogs(
    n: int,
    seed: int,
    *,
    domains: Sequence[str] = DOMAINS,
    turns: Sequence[int] = (4, 8),
    travel_insurance_share: float = 0.1,
) -> tuple[list[dict], list[dict]]:
    """n customer-service dialogs {id, domain, task, text}, dealt round-robin over `domains` (in
    the order given, so every domain gets n // len(domains) or one more). Each dialog has
    between turns[0] and turns[1] exchanges of a "USER: ..." and an "AGENT: ..." line: an
    opening with the request, the customer identifying themselves, task exchanges, a goodbye.
    Exactly round(travel_insurance_share x the INSURANCE dialogs) of them, chosen at random,
    are travel-insurance claims about flights (task TRAVEL_TASK).

    Planted (secret kinds): every customer's name ("name"); AIRLINE "confirmation_code"
    (6 upper-case letters and digits) and "phone"; MEDIA account "email" and "card_tail" (last
    four digits); INSURANCE "policy_number" ("POL-" + 8 digits) and "phone"; FASTFOOD "phone";
    FINANCE "card_tail"; SOFTWARE "email"."""
    check_int("dialogs", "n", n, 1)
    _check_options(domains, turns, travel_insurance_share)
    fake, rng = seeded("dialogs", seed)
    dealt = [domains[i % len(domains)] for i in range(n)]
    insurance = [i for i, domain in enumerate(dealt) if domain == "INSURANCE"]
    travel = set(rng.sample(insurance, round(travel_insurance_share * len(insurance))))
    records, rows = [], []
    for index, domain in enumerate(dealt):
        tasks = [t for t in _DOMAINS[domain]["tasks"] if t != TRAVEL_TASK]
        task = TRAVEL_TASK if index in travel else rng.choice(tasks)
        text, spans = _dialog(fake, rng, domain, task, rng.randint(*turns))
        record_id = f"dialogs-{index:06d}"
        records.append({"id": record_id, "domain": domain, "task": task, "text": text})
        rows += secret_rows(record_id, "text", spans)
    return records, with_duplicates(rows)
