// In-app help: a Help view, and a short "?" beside
// each feature that needs one (personalisation, All sources, Auto,
// automatic skills, the agent-thread views, projects), linking to its section.

import { $, el } from "./core.js";
import { language, t } from "./i18n.js";

const TOPICS = {
  en: {
    personalisation: {
      title: "Personalisation",
      short: "Your agent's name, avatar, chat mode, default model and language, and the instruction page it follows.",
      long: [
        "Personalise sets how your agent looks (name, avatar), where the chat sits (a sidebar or a floating panel), the model used when you pick none, and the interface language (the browser's by default).",
        "The active instruction page is the page your agent follows in every run. Create one from a template, switch to another, or edit it in Instructions: each save is a new version you can restore. Anyone who can edit a shared page changes how your agent behaves.",
      ],
    },
    sources: {
      title: "All sources",
      short:
        "What this conversation's runs may read: your workspace, your memory, the connectors and MCP servers you tick. Kept per conversation.",
      long: [
        "All sources lists what a run of this conversation may read. It is saved with the conversation, so each conversation keeps its own choice; changing one box keeps the others as they are.",
        "Memory: unticked, this conversation's runs recall none of your saved notes (the run's record says memory is off).",
        "@ mentions only reach the sources ticked here. A web-only model never reads your workspace or connectors: they show unticked for its runs, and the page asks before sending.",
        "Under each answer, Sources lists only what that run actually read (not what it was allowed to read), with the notes it recalled from memory.",
      ],
    },
    auto: {
      title: "Auto (model choice)",
      short:
        "Auto picks a configured model by the kind of request: fast for small ones, stronger for long or hard ones. The model used is shown under each answer.",
      long: [
        "With Auto, each request is classified (trivial, normal, long or hard) and given a fast, balanced or strong model among those configured.",
        "Auto never picks a model that is not configured, never changes model during a run, and avoids models marked expensive unless the request is long or hard. The model actually used is written under each answer.",
        'A request that needs the web ("search the web for…", "latest news", the weather, a stock price) goes to a model configured as searching the web, when there is one.',
      ],
    },
    skills: {
      title: "Automatic skills",
      short:
        "A skill can be applied without you naming it when your request matches it closely. It is always named, and you can say it was not relevant.",
      long: [
        "The Skill Router compares your request with the skills you have enabled that allow automatic use. A close match is applied; an uncertain one may be arbitrated; a weak one is left out. At most two are applied automatically.",
        'The skill used is named under the answer and linked from Sources to its definition in Skills. "Why this skill?" in Sources shows the candidates, their scores and the thresholds; when the scores were uncertain and an arbiter model decided, it shows the question the arbiter was asked, its raw answer and its reason. "This skill was not relevant" records a counter-example and offers to stop using that skill automatically for you.',
        "A request to translate, summarise, correct or rephrase a text gets no skill automatically, whatever the text is about.",
        "Type / in the message box to choose a skill yourself: it is then forced, whatever the router would decide.",
      ],
    },
    threads: {
      title: "Agent threads",
      short:
        "Each agent has one shared thread. The views by requester (pair) or correlation are filters of it, labelled partial.",
      long: [
        "Every question asked of an agent, by you or by another agent, lands on that agent's one thread, with who asked (the requester) and a correlation id tying each answer to its question. The full thread is shown by default and updates while runs stream.",
        "The pair view keeps one requester's exchanges with the agent; the correlation view keeps one question and its answers. Both are partial views of the same thread, and say so.",
        "When a thread grows long it rotates: the closed segment is replaced, for the model, by a bounded handoff summary, shown at the seam. Changing an agent's provider or model (a provider swap) starts it from that summary and the recent entries, not from the old provider's session.",
        "Live state says who is doing what now and expires on its own; it is never recalled as memory. The project context is the set of rules every agent receives at the start of each run.",
      ],
    },
    memory: {
      title: "Memory",
      short: "Durable notes runs recall when relevant: decisions, feature summaries, preferences, facts.",
      long: [
        "Memory holds curated, durable notes. A run recalls the notes closest to its request (by words and by meaning) and lists them in its Sources panel, each linking here.",
        "Search shows the notes a run asking the same thing would recall. Edit or delete a note that is wrong: runs recall the new text from then on.",
        "An agent's note nobody asked for is a proposal under Proposals, with its diff: an editor or owner accepts it (the note is written, or the existing note it names is updated) or refuses it (nothing is written).",
      ],
    },
    projects: {
      title: "Projects",
      short:
        "The project chosen at the top is what Memory, the project context, live state, the Agents list and your chat's runs use. Its members share them.",
      long: [
        "A project's durable notes, project context, live state and agents are shared by all its members. Your instruction pages, personal settings and conversations stay yours, whatever the project.",
        "Personal is your own project, created on first use and never shared. Create a project with New project to share: you become its owner. The page remembers the project you chose.",
        "Each member has a role: a viewer reads, an editor also writes notes, the context and live state and asks the project's agents, an owner also manages the members and the project's settings. Members shows who is in the project; any member can leave a shared project, but its last owner must first make someone else an owner.",
      ],
    },
  },
  fr: {
    personalisation: {
      title: "Personnalisation",
      short:
        "Le nom, l'avatar, le mode de discussion, le modèle par défaut et la langue de votre agent, et la page d'instructions qu'il suit.",
      long: [
        "Personnaliser règle l'apparence de votre agent (nom, avatar), la place de la discussion (panneau latéral ou flottant), le modèle utilisé quand vous n'en choisissez pas, et la langue de l'interface (celle du navigateur par défaut).",
        "La page d'instructions active est celle que votre agent suit à chaque exécution. Créez-en une à partir d'un modèle, passez à une autre, ou modifiez-la dans Instructions : chaque enregistrement est une nouvelle version que vous pouvez restaurer. Toute personne qui peut modifier une page partagée change le comportement de votre agent.",
      ],
    },
    sources: {
      title: "Toutes les sources",
      short:
        "Ce que les exécutions de cette conversation peuvent lire : votre espace de travail, votre mémoire, les connecteurs et serveurs MCP cochés. Conservé par conversation.",
      long: [
        "Toutes les sources liste ce qu'une exécution de cette conversation peut lire. Le choix est enregistré avec la conversation : chacune garde le sien ; changer une case laisse les autres telles quelles.",
        "Mémoire : décochée, les exécutions de cette conversation ne rappellent aucune de vos notes enregistrées (l'enregistrement du run indique que la mémoire est désactivée).",
        "Les mentions @ n'atteignent que les sources cochées ici. Un modèle web uniquement ne lit jamais votre espace de travail ni vos connecteurs : ils apparaissent décochés pour ses exécutions, et la page demande confirmation avant l'envoi.",
        "Sous chaque réponse, Sources ne liste que ce que l'exécution a réellement lu (pas ce qu'elle avait le droit de lire), avec les notes rappelées de la mémoire.",
      ],
    },
    auto: {
      title: "Auto (choix du modèle)",
      short:
        "Auto choisit un modèle configuré selon la demande : rapide pour les petites, plus fort pour les longues ou difficiles. Le modèle utilisé est affiché sous chaque réponse.",
      long: [
        "Avec Auto, chaque demande est classée (triviale, normale, longue ou difficile) et reçoit un modèle rapide, équilibré ou fort parmi ceux configurés.",
        "Auto ne choisit jamais un modèle non configuré, ne change jamais de modèle pendant une exécution, et évite les modèles marqués coûteux sauf pour une demande longue ou difficile. Le modèle réellement utilisé est écrit sous chaque réponse.",
        "Une demande qui a besoin du web (« cherche sur le web… », « actualités d'aujourd'hui », la météo, un cours de bourse) va à un modèle configuré comme cherchant sur le web, s'il y en a un.",
      ],
    },
    skills: {
      title: "Compétences automatiques",
      short:
        "Une compétence peut s'appliquer sans que vous la nommiez quand votre demande lui correspond nettement. Elle est toujours nommée, et vous pouvez dire qu'elle n'était pas pertinente.",
      long: [
        "Le routeur de compétences compare votre demande aux compétences activées qui autorisent l'usage automatique. Une correspondance nette est appliquée ; une correspondance incertaine peut être arbitrée ; une faible est écartée. Deux au plus sont appliquées automatiquement.",
        "La compétence utilisée est nommée sous la réponse, et Sources mène à sa définition dans Compétences. « Pourquoi cette compétence ? » dans Sources montre les candidates, leurs scores et les seuils ; quand les scores étaient incertains et qu'un modèle arbitre a tranché, la question posée à l'arbitre, sa réponse brute et sa raison. « Cette compétence n'était pas pertinente » enregistre un contre-exemple et propose de ne plus l'utiliser automatiquement pour vous.",
        "Une demande de traduire, résumer, corriger ou reformuler un texte ne reçoit aucune compétence automatiquement, quel que soit le sujet du texte.",
        "Tapez / dans la zone de message pour choisir vous-même une compétence : elle est alors imposée, quelle que soit la décision du routeur.",
      ],
    },
    threads: {
      title: "Fils des agents",
      short:
        "Chaque agent a un seul fil partagé. Les vues par demandeur (paire) ou par corrélation en sont des filtres, signalés comme partiels.",
      long: [
        "Toute question posée à un agent, par vous ou par un autre agent, arrive sur le fil unique de cet agent, avec qui l'a posée (le demandeur) et un identifiant de corrélation qui relie chaque réponse à sa question. Le fil complet s'affiche par défaut et se met à jour pendant les exécutions.",
        "La vue par paire garde les échanges d'un demandeur avec l'agent ; la vue par corrélation garde une question et ses réponses. Ce sont deux vues partielles du même fil, et elles le disent.",
        "Quand un fil devient long, il tourne : le segment clos est remplacé, pour le modèle, par un résumé de passation borné, affiché à la jointure. Changer le fournisseur ou le modèle d'un agent (changement de fournisseur) le fait repartir de ce résumé et des entrées récentes, pas de la session de l'ancien fournisseur.",
        "L'état en direct dit qui fait quoi en ce moment et expire seul ; il n'est jamais rappelé comme mémoire. Le contexte du projet est l'ensemble des règles que chaque agent reçoit au début de chaque exécution.",
      ],
    },
    memory: {
      title: "Mémoire",
      short:
        "Des notes durables que les exécutions rappellent quand elles sont pertinentes : décisions, résumés de fonctionnalités, préférences, faits.",
      long: [
        "La mémoire garde des notes durables et choisies. Une exécution rappelle les notes les plus proches de sa demande (par les mots et par le sens) et les liste dans son panneau Sources, chacune avec un lien vers ici.",
        "La recherche montre les notes qu'une exécution posant la même question rappellerait. Modifiez ou supprimez une note erronée : les exécutions rappellent le nouveau texte dès lors.",
        "La note qu'un agent propose sans qu'on la lui demande est une proposition, sous Propositions, avec ses différences : un éditeur ou un propriétaire l'accepte (la note est écrite, ou la note existante qu'elle désigne est mise à jour) ou la refuse (rien n'est écrit).",
      ],
    },
    projects: {
      title: "Projets",
      short:
        "Le projet choisi en haut est celui qu'utilisent la Mémoire, le contexte du projet, l'état en direct, la liste des Agents et les exécutions de votre discussion. Ses membres les partagent.",
      long: [
        "Les notes durables, le contexte, l'état en direct et les agents d'un projet sont partagés par tous ses membres. Vos pages d'instructions, vos réglages personnels et vos conversations restent à vous, quel que soit le projet.",
        "Personnel est votre propre projet, créé au premier usage et jamais partagé. Créez un projet avec Nouveau projet pour partager : vous en devenez propriétaire. La page retient le projet choisi.",
        "Chaque membre a un rôle : un lecteur lit, un éditeur écrit aussi les notes, le contexte et l'état en direct et interroge les agents du projet, un propriétaire gère aussi les membres et les réglages du projet. Membres montre qui fait partie du projet ; tout membre peut quitter un projet partagé, mais son dernier propriétaire doit d'abord rendre quelqu'un d'autre propriétaire.",
      ],
    },
  },
};

const topics = () => TOPICS[language()] || TOPICS.en;

export function enterHelp(topic) {
  $("help-sections").replaceChildren(
    ...Object.entries(topics()).map(([key, section]) =>
      el(
        "section",
        { id: `help-${key}`, className: "help-section", "aria-labelledby": `help-${key}-title` },
        el("h2", { id: `help-${key}-title`, textContent: section.title }),
        ...section.long.map((text) => el("p", { textContent: text })),
      ),
    ),
  );
  if (topic) $(`help-${topic}`)?.scrollIntoView({ block: "start" });
}

// The "?" beside a feature: its short help, and a link to its section.
export function helpToggle(key) {
  const section = topics()[key];
  return el(
    "details",
    { className: "help", dataset: { topic: key } },
    el("summary", {
      "aria-label": t("Help: {topic}", { topic: section.title }),
      title: t("Help: {topic}", { topic: section.title }),
      textContent: "?",
    }),
    el("p", { textContent: section.short }),
    el("a", { href: `#help/${key}`, textContent: t("More in Help") }),
  );
}

export function placeHelp() {
  for (const slot of document.querySelectorAll("[data-help]")) slot.replaceChildren(helpToggle(slot.dataset.help));
}
