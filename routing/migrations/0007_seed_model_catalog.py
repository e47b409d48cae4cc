"""Seed the model catalog with common models of the seeded providers.

Context windows and list prices (USD per million tokens, the base tier where a provider tiers
them) are the providers' published figures at the time of writing; a price left empty was not
certain. Only Anthropic's Messages API is known to continue a partial assistant message
(prefill): OpenAI's reasoning and chat models are marked "no", the rest "unknown" (the gateway
then regenerates and splices). Reasoning models think before their first token, so they get a
longer time-to-first-token limit. Rows are seeded only for providers that still exist, and an
existing row is left as the operator made it.
"""

from decimal import Decimal

from django.db import migrations

REASONING_TTFT_MS = 180_000

# provider, model, context window, accepts_prefill, time_to_first_token_ms, input, output price
CATALOG = [
    ("openai", "gpt-4o", 128_000, "no", None, "2.50", "10.00"),
    ("openai", "gpt-4o-mini", 128_000, "no", None, "0.15", "0.60"),
    ("openai", "gpt-4.1", 1_047_576, "no", None, "2.00", "8.00"),
    ("openai", "gpt-4.1-mini", 1_047_576, "no", None, "0.40", "1.60"),
    ("openai", "gpt-4.1-nano", 1_047_576, "no", None, "0.10", "0.40"),
    ("openai", "o3", 200_000, "no", REASONING_TTFT_MS, "2.00", "8.00"),
    ("openai", "o3-mini", 200_000, "no", REASONING_TTFT_MS, "1.10", "4.40"),
    ("openai", "o4-mini", 200_000, "no", REASONING_TTFT_MS, "1.10", "4.40"),
    ("openai", "gpt-5", 400_000, "no", REASONING_TTFT_MS, "1.25", "10.00"),
    ("openai", "gpt-5-mini", 400_000, "no", REASONING_TTFT_MS, "0.25", "2.00"),
    ("anthropic", "claude-opus-4-1-20250805", 200_000, "yes", None, "15.00", "75.00"),
    ("anthropic", "claude-opus-4-20250514", 200_000, "yes", None, "15.00", "75.00"),
    ("anthropic", "claude-sonnet-4-20250514", 200_000, "yes", None, "3.00", "15.00"),
    ("anthropic", "claude-3-7-sonnet-20250219", 200_000, "yes", None, "3.00", "15.00"),
    ("anthropic", "claude-3-5-haiku-20241022", 200_000, "yes", None, "0.80", "4.00"),
    ("gemini", "gemini-2.5-pro", 1_048_576, "unknown", REASONING_TTFT_MS, "1.25", "10.00"),
    ("gemini", "gemini-2.5-flash", 1_048_576, "unknown", REASONING_TTFT_MS, "0.30", "2.50"),
    ("gemini", "gemini-2.0-flash", 1_048_576, "unknown", None, "0.10", "0.40"),
    ("deepseek", "deepseek-chat", 128_000, "unknown", None, None, None),
    ("deepseek", "deepseek-reasoner", 128_000, "unknown", REASONING_TTFT_MS, None, None),
    ("mistral", "mistral-large-latest", 128_000, "unknown", None, "2.00", "6.00"),
    ("mistral", "mistral-small-latest", 128_000, "unknown", None, None, None),
    ("mistral", "codestral-latest", 256_000, "unknown", None, None, None),
    ("groq", "llama-3.3-70b-versatile", 131_072, "unknown", None, "0.59", "0.79"),
    ("groq", "llama-3.1-8b-instant", 131_072, "unknown", None, "0.05", "0.08"),
]


def _price(text):
    return Decimal(text) if text is not None else None


def seed(apps, schema_editor):
    Provider = apps.get_model("routing", "Provider")
    Entry = apps.get_model("routing", "ModelCatalogEntry")
    slugs = {row[0] for row in CATALOG}
    present = set(Provider.objects.filter(slug__in=slugs).values_list("slug", flat=True))
    for provider, model, context, prefill, ttft, price_in, price_out in CATALOG:
        if provider not in present:  # an operator deleted it: nothing to describe
            continue
        Entry.objects.get_or_create(
            provider_id=provider,
            model=model,
            defaults={
                "context_window": context,
                "accepts_prefill": prefill,
                "time_to_first_token_ms": ttft,
                "input_price_per_mtok": _price(price_in),
                "output_price_per_mtok": _price(price_out),
            },
        )


def unseed(apps, schema_editor):
    Entry = apps.get_model("routing", "ModelCatalogEntry")
    for provider, model, *_ in CATALOG:
        Entry.objects.filter(provider_id=provider, model=model).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0006_model_catalog"),
    ]

    operations = [
        migrations.RunPython(seed, unseed),
    ]
