"""Example requests per built-in toolset, the documents of the meaning layer (`gateway.selection.meaning`).

Written from each toolset's purpose and from the labelled corpus (`bench/selection_corpus.jsonl`), in
English and Chinese, to give the words people use for a need that no keyword names ("is the road
open", "anything on the weekend"). Never from the unseen held-out set, whose recall measures them.
A toolset without examples here (an MCP server's) is described by its description alone.
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "sessions": (
        "what did we talk about before", "what did I tell you last week", "you said something earlier about it",
        "remind me what we discussed", "what was that thing you mentioned", "go back to our earlier conversation",
        "what was the name you gave me last time", "what did you recommend the other day", "what did I ask you",
        "the list you made for me earlier", "that answer from before, repeat it", "what was the link you sent me",
        "did we already cover this", "find where I talked about my holiday plans",
        "the advice you gave me back then",
        ("earlier before last time the other day yesterday you said you told me you mentioned you recommended you "
         "suggested what was it called again remind me what we"),
        "我们之前聊过什么", "你上次说的那个叫什么", "我之前问过你", "刚才说的那个", "上次推荐的",
        "昨天问你的那个问题", "你前面提到的", "那次你给我列的单子", "我们说好的是什么", "之前的对话里",
        "刚才 之前 上次 前几天 昨天 你说 你提到 你推荐 叫什么来着",
    ),
    "memory": (
        "remember that I am allergic", "keep in mind I prefer", "you should know I don't eat meat",
        "my wife's name is", "I moved to a new city", "I live in", "forget what I said about my job",
        "what do you know about me", "I'm vegan, I hate long answers, I prefer tea", "note that my birthday is",
        "for your information I work as a nurse", "my kids are called", "my employer is", "I can't eat gluten",
        "my favourite team is", "update what you know",
        ("about me: my name my partner wife husband kids son daughter sister brother mother father job work employer "
         "city home address diet allergy preference birthday"),
        "记住我喜欢", "我对海鲜过敏", "我住在", "忘掉我说过的", "你知道我哪些事", "我是素食者", "我不吃辣",
        "我老婆叫", "我儿子今年上小学", "我的生日是", "我不能吃", "记住这个",
        "关于我 我叫 我老公 我老婆 孩子 女儿 儿子 姐姐 哥哥 爸妈 工作 单位 住 过敏 喜欢 不喜欢 生日",
    ),
    "tasks": (
        "add to my to-do list", "put it on my list", "what's on my list", "mark it done", "I finished that chore",
        "note that I need to buy", "cross off the groceries", "what do I still have to do",
        "remove the finished ones", "new task for me", "which to-dos are open", "check that item off",
        "I have to renew my passport sometime", "things I need to get done this week", "errands to run",
        "due by the end of the month",
        "to-do todo list task chores errands done finished tick off cross off pending still to do",
        "加到待办", "待办事项还有什么", "那件事做完了", "清单上加一个", "我要记得买", "任务完成了", "记个待办",
        "还有哪些没做完", "把那项划掉", "新任务", "事情清单", "这周要办的事",
        "待办 任务 清单 要做的事 做完 完成 划掉 没做",
    ),
    "automation": (
        "remind me later", "every morning send me", "in half an hour tell me", "wake me at seven",
        "stop the daily summary", "which reminders are set", "each week at monday nine send a report",
        "alert me at noon", "a recurring reminder", "turn off the weekly digest", "run that automation right now",
        "change the reminder to eight", "nudge me this evening", "did the automation run last night",
        ("reminder remind alarm wake nudge ping later at seven every day daily weekly each morning recurring schedule "
         "cancel the reminder"),
        "提醒我", "每天早上", "半小时后叫我", "取消每天的推送", "有哪些提醒", "到点叫我", "晚上八点通知我",
        "每周一发我周报", "把提醒改到九点", "自动推送", "提醒 叫我 闹钟 每天 每周 定时 推送 到时候",
    ),
    "messaging": (
        "send me a message on telegram", "is the bot connected", "did my reminder arrive",
        "which chats are connected", "send it to me on slack", "message me on my phone",
        "notify me separately when finished", "was my message delivered", "is the connection up",
        "which surface am I chatting on",
        "telegram slack chat connected delivered delivery sent arrived notify me separately status of the bot",
        "给我发条消息", "机器人连上了吗", "消息送到了吗", "发到我的telegram", "电报 机器人 连接 送达 通知",
    ),
    "calendar": (
        "what do I have this weekend", "am I free later today", "anything on after work", "what's on tonight",
        "my plans for the week", "put lunch with Ana on Friday", "move my afternoon meeting",
        "cancel the call tomorrow", "when is my next appointment", "how busy is next week", "is the morning clear",
        "book time with the team", "am I available at three", "shift the session to later",
        "what's first on my day", "is it still happening", "when do I see the doctor",
        "set up a call with the client", "add the concert to my plans", "free slots this week",
        "what time is the party",
        "times of day: morning noon afternoon evening tonight after work later today this week weekend weekday o'clock",
        "plans and slots: plans booked slot free busy available clash overlap agenda day week month",
        ("appointments: dentist doctor haircut interview lesson party wedding dinner lunch drinks meetup catch-up "
         "session"),
        "周末有什么安排", "下午有空吗", "把会议改到明天", "下周忙吗", "周五晚上约了谁", "明天上午有事吗",
        "约个时间见面", "下次看医生是哪天", "早上 上午 下午 晚上 周末 工作日 几点",
        "安排 有空 忙 约 见面 课 面试 聚会 饭局 看病 复查",
    ),
    "email": (
        "reply to her message and say yes", "did he write back", "any new mail", "check my inbox",
        "forward the invoice to my accountant", "answer the letter from the landlord", "summarise unread messages",
        "draft a note to the school", "send the email to the team", "what did the bank send me",
        "tell my colleague I accept", "write back to him that it's fine", "has the company answered me",
        "did the shop confirm the order by mail",
        "reply answer write back tell him tell her let them know thank decline accept confirm",
        "people who write: colleague boss manager client customer landlord teacher school supplier bank company",
        ("mail words: inbox message letter sender subject attachment invoice contract offer confirmation newsletter "
         "unread"),
        "回复他的邮件", "有新邮件吗", "给老师写封信", "转发那封发票", "看看收件箱", "回他一句", "把文件发给老板",
        "对方回我没有", "发给他们", "回复 回信 回他 告诉他 转告 答复 拒绝 接受 确认",
        "老板 领导 客户 老师 学校 银行 对方 收件箱 信",
    ),
    "skills": (
        "what skills do you have", "use the skill for", "write a new skill", "update the procedure for",
        "how do you usually do this recurring task", "save this as a procedure",
        "the steps you follow for my expenses", "edit the routine for",
        "skill procedure routine how-to playbook steps saved instructions",
        "你有哪些技能", "用那个技能", "新建一个技能", "修改技能", "保存成固定流程", "按照那个步骤来", "操作手册",
        "技能 流程 步骤 方法 指南",
    ),
    "subagents": (
        "have a helper research this in the background", "delegate this to a sub-agent",
        "in parallel compare options", "work on it on your own and report back", "spin up helpers",
        "background worker", "stop that background job", "let an assistant dig into it while we talk",
        "helper assistant agent sub-agent delegate parallel background research report back",
        "派一个助手去调研", "后台处理然后告诉我", "并行调研", "子代理", "让助手去做",
        "助手 子代理 后台 并行 调研 汇报",
    ),
    "web": (
        "what's the price of", "how much does it cost now", "when does the shop close", "opening hours",
        "is the road closed", "traffic on the highway", "roadworks and delays on the train line",
        "sunrise and sunset time", "weather forecast rain tomorrow", "recipe how to cook",
        "address and phone number of", "exchange rate dollar euro", "stock share price", "who won the match score",
        "latest news about", "look it up online", "search the web", "find a cheap flight hotel",
        "reviews of the restaurant", "until when is the bank open", "when does the sun rise",
        "how do I make soup, ingredients", "how to bake a cake", "where is it located, street",
        "convert currency rate", "game result last night", "tickets and timetable for the train",
        "air quality and temperature", "what's new in the world", "summarise this page",
        "cost of a phone nowadays",
        ("shops and places: supermarket pharmacy chemist bakery gallery library post bank branch town hall embassy "
         "consulate zoo pool cinema theatre restaurant cafe bar hospital clinic station"),
        "open now, opens, closes at, closing time, hours on sunday, public holiday hours, is it open today",
        ("roads and travel: road motorway highway bridge tunnel closure diversion roadworks traffic accident queue "
         "delay strike train bus tram subway underground tube flight airport departure arrival platform timetable"),
        "sun and sky: sunrise sunset dawn daylight light weather rain snow forecast temperature degrees humidity moon",
        ("recipes and cooking: recipe ingredients how to cook bake roast fry boil grill dish dinner idea steps oven "
         "minutes vegetarian version"),
        ("addresses and contacts: address location where is, street postcode directions nearest near me phone number "
         "website contact map"),
        ("prices and markets: price cost how much cheap expensive deal sale fuel diesel gasoline litre gallon rate "
         "currency exchange stock shares market crypto bitcoin index"),
        ("sports and news: match game score result won lost league cup final fixture player news headlines election "
         "happened today update"),
        "tickets and bookings to look up: train ticket flight fare hotel availability concert tickets",
        "价格多少钱", "几点关门", "营业时间", "路况堵车封路", "日出日落", "天气预报下雨", "菜谱怎么做", "地址电话",
        "汇率", "股价", "比分谁赢了", "最新新闻", "上网查一下", "开门吗", "几点开门", "高速堵车", "怎么烧",
        "在哪里", "雾霾", "查一下", "超市 药店 面包店 银行 大使馆 医院 餐厅 商场 加油站",
        "营业 关门 开门 几点开 周末营业 节假日",
        "路况 高速 公路 大桥 隧道 封路 堵车 事故 修路 延误 停运 公交 火车 航班 机场 轮渡",
        "日出 日落 天气 下雨 刮风 气温 预报", "菜谱 怎么做 食材 烤 炒 煮 蒸 炖",
        "地址 在哪 位置 怎么走 最近的 电话号码", "价格 多少钱 便宜 汇率 股价 行情 油价",
        "比分 比赛 结果 赢 输 冠军 新闻 头条 最新消息", "车票 机票 酒店 门票 余票",
    ),
    "browser": (
        "go to the website and log in", "fill in the form on the page", "click the button on the site",
        "take a screenshot of the web page", "download the statement from the bank website",
        "checkout on the shop site", "submit the application online for me", "sign in to my account on the portal",
        "book it through their website", "open the page in a real browser",
        ("website web page portal log in sign in account form submit checkout click button javascript screenshot of "
         "the page"),
        "打开网站登录", "在网页上填表", "网页截图", "点网站上的按钮", "登录账号",
        "网站 网页 登录 账号 表单 填写 下单 截图",
    ),
    "file": (
        "open the file and read it", "save this as a text file", "what's in the folder", "rename the document",
        "find the spreadsheet in my documents", "write notes to a file", "edit the config file",
        "list my downloads", "create a markdown file", "change a line in the file", "search my files for a word",
        "the txt on my computer",
        ("file folder directory document text markdown notes config yaml json csv spreadsheet read write save create "
         "edit rename open"),
        "打开文件", "保存成文件", "文件夹里有什么", "重命名文件", "找一下文档", "新建文件", "改一下文件内容",
        "文件里搜一下", "文件 文件夹 目录 文档 笔记 配置 表格 保存 新建 修改 打开",
    ),
    "terminal": (
        "run the command", "disk space left", "which version is installed", "kill the process on the port",
        "git pull and run the tests", "install a package with apt or pip", "check cpu and memory usage",
        "ping a server", "run the script",
        ("shell command terminal bash process port cpu memory ram disk uptime logs service restart install upgrade "
         "package git python node pip apt script"),
        "运行命令", "磁盘空间", "端口被占用", "安装软件包", "跑一下测试", "进程", "执行脚本", "命令行",
        "命令 终端 进程 端口 内存 磁盘 日志 安装 升级 脚本",
    ),
    "computer_use": (
        "click on my screen", "what's on my screen", "open the app on my desktop", "type into the window",
        "close the windows on my computer", "scroll down on the screen", "press enter in that program",
        "move the cursor",
        ("my screen desktop window app application mouse cursor click double-click type keyboard press key scroll "
         "popup button on my computer"),
        "点屏幕上的按钮", "屏幕上显示什么", "打开电脑上的应用", "在窗口里输入", "桌面上的窗口",
        "屏幕 桌面 窗口 应用 软件 鼠标 点击 键盘 输入 按键 滚动 弹窗 电脑上",
    ),
    "artifact": (
        "the file I sent you", "the photo I attached", "export it as a file to download", "the voice note I sent",
        "pin that document", "what does the attachment say",
        "attachment the file I sent the photo I sent the image I uploaded voice note recording pdf document keep pin",
        "我发给你的文件", "我发的图片", "导出成文件", "我传的照片", "我发的语音",
        "附件 我发的 照片 图片 语音 录音 文件 保留",
    ),
    "tts": (
        "read it out loud", "say it as a voice note", "send me audio of this", "speak the answer",
        "I can't look at the screen, tell me by voice", "as a spoken message",
        "voice audio speak read aloud out loud spoken listen",
        "读给我听", "发语音", "念出来", "语音播报", "语音 朗读 念 读出来 听",
    ),
    "media_generation": (
        "draw a picture of", "generate an image", "make a logo", "create an illustration", "paint a watercolour",
        "make art of", "an image showing",
        "draw paint sketch illustrate picture image photo art logo avatar icon cartoon wallpaper design",
        "画一张", "生成图片", "做个头像", "设计一个标志", "画个", "做张图", "插画",
        "画 画一 图片 照片 海报 头像 图标 插图 设计 壁纸",
    ),
}
