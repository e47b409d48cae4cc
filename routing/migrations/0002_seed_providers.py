"""Seed the provider catalog; the flags reproduce the reference's hard-coded provider lists."""

from django.db import migrations

# slug, name, category, base_url, wire, full_text, honors_scope, egress_bucketed, per_model_quota
CATALOG = [
    ("openai", "OpenAI", "api_key", "https://api.openai.com/v1", "openai", 0, 0, 0, 0),
    ("anthropic", "Anthropic", "api_key", "https://api.anthropic.com/v1", "anthropic", 0, 0, 0, 0),
    ("openrouter", "OpenRouter", "api_key", "https://openrouter.ai/api/v1", "openai", 0, 0, 0, 0),
    ("glm", "GLM (Zhipu)", "api_key", "https://open.bigmodel.cn/api/paas/v4", "openai", 0, 0, 0, 0),
    ("minimax", "MiniMax", "api_key", "https://api.minimax.io/v1", "openai", 0, 0, 0, 0),
    ("agentrouter", "AgentRouter", "api_key", "https://agentrouter.org/v1", "openai", 1, 1, 0, 0),
    ("opencode", "OpenCode", "api_key", "https://opencode.ai/zen/v1", "openai", 0, 1, 1, 0),
    ("opencode-zen", "OpenCode Zen", "api_key", "https://opencode.ai/zen/v1", "openai", 0, 1, 0, 0),
    (
        "opencode-go",
        "OpenCode Go",
        "api_key",
        "https://opencode.ai/zen/go/v1",
        "openai",
        0,
        1,
        1,
        0,
    ),
    ("opencode-cli", "OpenCode CLI", "oauth", "https://opencode.ai/zen/v1", "openai", 0, 1, 1, 0),
    (
        "gemini",
        "Gemini (OpenAI-compatible)",
        "api_key",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "openai",
        0,
        0,
        0,
        1,
    ),
    ("groq", "Groq", "api_key", "https://api.groq.com/openai/v1", "openai", 0, 0, 0, 0),
    ("deepseek", "DeepSeek", "api_key", "https://api.deepseek.com/v1", "openai", 0, 0, 0, 0),
    ("mistral", "Mistral", "api_key", "https://api.mistral.ai/v1", "openai", 0, 0, 0, 0),
    ("ollama-local", "Ollama (local)", "local", "http://127.0.0.1:11434/v1", "openai", 0, 0, 0, 1),
    ("lm-studio", "LM Studio", "local", "http://127.0.0.1:1234/v1", "openai", 0, 0, 0, 1),
    ("vllm", "vLLM", "local", "http://127.0.0.1:8001/v1", "openai", 0, 0, 0, 1),
    (
        "mock",
        "Mock (demo fake upstream)",
        "local",
        "http://127.0.0.1:8100/v1",
        "openai",
        0,
        0,
        0,
        0,
    ),
]


def seed(apps, schema_editor):
    Provider = apps.get_model("routing", "Provider")
    for slug, name, category, base_url, wire, full, honors, egress, per_model in CATALOG:
        Provider.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "category": category,
                "base_url": base_url,
                "wire_format": wire,
                "full_text_rules": bool(full),
                "honors_rule_scope": bool(honors),
                "egress_bucketed_lock": bool(egress),
                "per_model_quota": bool(per_model),
            },
        )


def unseed(apps, schema_editor):
    Provider = apps.get_model("routing", "Provider")
    Provider.objects.filter(slug__in=[row[0] for row in CATALOG]).delete()


class Migration(migrations.Migration):
    dependencies = [("routing", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
